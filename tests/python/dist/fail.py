"""Worker for test_distributed.py (mpirun -np 2): rank 1 raises while rank 0
waits for it in a collective; the job must end with rank 1's message."""
import os
import musa
import musa.distributed as dist

dist.init_process_group(os.environ.get("MUSA_TEST_BACKEND", "mpi"))
if dist.get_rank() == 1:
    raise ValueError("rank one gave up on purpose")
t = musa.ones(4)
dist.all_reduce(t)  # waits for rank 1 forever, unless the job is aborted
print("rank 0 finished the all_reduce: the job was not aborted")
