"""For test_dist_tcp.py: rank 0 (this process) first waits at a rendezvous
nobody else comes to, then in an all_reduce for rank 1 (a child that
joins, then sleeps), and gets a SIGINT after 1 s each time: both waits
must stop with KeyboardInterrupt at once, and the group then refuse
further calls."""
import os
import signal
import subprocess
import sys
import threading
import time

import musa
import musa.distributed as dist

port, lonely = int(sys.argv[1]), int(sys.argv[2])
threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
t0 = time.monotonic()
try:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{lonely}", rank=0, world_size=2)
    print("no interrupt at the rendezvous")
except KeyboardInterrupt:
    print(f"rendezvous: KeyboardInterrupt after {time.monotonic() - t0:.1f} s")
assert not dist.is_initialized()
join = "dist.init_process_group('gloo', init_method='tcp://127.0.0.1:%d', rank=%d, world_size=2)"
child = subprocess.Popen([sys.executable, "-c", "import time, musa.distributed as dist; "
                          + join % (port, 1) + "; time.sleep(60)"])
try:
    exec(join % (port, 0))
    threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    t0 = time.monotonic()
    try:
        dist.all_reduce(musa.ones(3))
        print("no interrupt")
    except KeyboardInterrupt:
        print(f"KeyboardInterrupt after {time.monotonic() - t0:.1f} s")
    try:
        dist.barrier()
    except RuntimeError as e:
        print("then:", e)
    dist.destroy_process_group()
finally:
    child.kill()
    child.wait()
