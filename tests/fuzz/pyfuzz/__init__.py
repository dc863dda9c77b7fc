"""The Python fuzzer's parts (tests/fuzz/fuzz_py.py drives them):

    api     what is called: every public function, Tensor method, operator,
            property and setter, with its parameters
    gen     the calls, as Python source built from (seed, index) alone
    check   the child process: runs each call in musa and in PyTorch, and
            judges the outcome
"""
