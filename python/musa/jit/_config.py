"""Config: the settings of a compiled function or module (``musa.Config``).

Invariants: every setting is validated when set, so a Config that exists is
usable; ``dynamic`` maps an argument (name or position) to {dim: (min, max)}
with 0 <= min <= max. A Config knows the compiled functions that use it
(weakly): changing a setting drops the plans they made under the old one, so
their next calls capture again (logged as a recompile). Copies and pickles
are used by no compiled function.
"""

import weakref

UNBOUNDED = 1 << 62  # the upper end of a dynamic range given without one
# settings that change no plan: changing them recompiles nothing
_NOT_PLANNED = frozenset({"max_variants"})


class Config:
    """Settings of a compiled function or module.

    fusion_level: 0 no fusion; 1 elementwise chains; 2 (default) also
        reductions over rows at the end of a chain, epilogues of matmul,
        conv and softmax (bias, activation) run on their tiles, and
        row-wise normalisations inside chains (softmax, log_softmax,
        batch_norm_apply: attention's masked softmax scores are one group).
        Every level computes the same bits (docs/jit.md).
    memory_arena: plan intermediates into one arena with reuse (default on).
    num_threads: threads for concurrent branches (None: musa.get_num_threads()).
    dynamic: {argument name or index: {dim: (min, max)}} dims that may vary
        without recompiling.
    disable_passes: pass names to skip ("simplify", "cse", "fold", "dce", "remat",
        "attention", "channels_last", "winograd", "fuse").
    max_variants: compiled variants per function before it runs eagerly.
    verify: run the IR verifier after every pass.
    remat: in compiled training, recompute cheap elementwise values in the
        backward instead of saving them (default on). False recomputes
        nothing: no remat pass, and a memory_budget is then only checked.
    memory_budget: bytes a compiled plan may need (its predicted peak, as
        compiled.memory_plan() reports it), or None (default: no limit).
        Over budget, the planner recomputes more values instead of keeping
        them (longer chains of cheap ops, then matmuls and convolutions,
        with the views of them that later reads see, such as attention's
        q, k and v: activation checkpointing; results stay bitwise the
        same) and raises
        MemoryError, naming the smallest peak it reached and what makes it
        up, when even that does not fit. With winograd, the room a budget
        leaves above the plan's peak also lets more convolutions run
        Winograd (their workspaces may grow the plan's block into it).
    channels_last: keep the activations of convolution chains channels-last
        (NHWC) inside the plan, so oneDNN's convolutions run without layout
        reorders around them (docs/jit.md, "Channels-last"). Off by
        default: results then differ from eager in rounding (other
        convolution kernels, other orders of the batch norm sums), where
        every other setting computes eager's bits.
    fuse_attention: run every attention written out as ops (q @ k^T, an
        optional scale and mask, softmax over the last dim, @ v) on the fused
        scaled_dot_product_attention formulas, forward and backward, so the
        softmax's probabilities are not saved for the backward (docs/jit.md,
        "Fused attention"); results then differ from eager in rounding. Off
        by default, where the pass fuses only heads whose fused kernels give
        eager's bits (float32, 16 to 128 queries, keys and dims);
        disable_passes=("attention",) turns both off.
    winograd: run float32 3x3 stride-1 convolutions, forward and backward,
        on oneDNN's Winograd primitive, about twice as fast here, where it
        has one for the shape and its workspace (the transformed tiles,
        often several times the activations) fits in the plan's arena
        without raising its peak, or within memory_budget when one is set
        (docs/jit.md, "Winograd convolutions").
        Off by default: results then differ from eager in rounding (about
        1e-6 relative).
    capture: how the first call of each signature is captured. "trace"
        runs the function eagerly while recording (its result is eager's);
        "symbolic" records on meta tensors, computing nothing, then runs the
        plan (the first call costs a plan's memory, not an eager step's);
        "auto" (default) is symbolic unless the function itself reads tensor
        values on the host (.item(), print, ...), and falls back to tracing,
        logged, when a symbolic capture meets a host read.

    A setting changed after a compiled function has run applies from its
    next call, which captures again (logged as a recompile); max_variants
    changes no plan and recompiles nothing.
    """

    CAPTURES = ("auto", "trace", "symbolic")

    def __init__(self, fusion_level=2, memory_arena=True, num_threads=None, dynamic=None,
                 disable_passes=(), max_variants=8, verify=False, poison=False, remat=True,
                 capture="auto", memory_budget=None, channels_last=False, fuse_attention=False,
                 winograd=False):
        if fusion_level not in (0, 1, 2):
            raise ValueError(f"[Config] fusion_level must be 0, 1 or 2, got {fusion_level!r}")
        if num_threads is not None and (not isinstance(num_threads, int) or num_threads < 1):
            raise ValueError(f"[Config] num_threads must be a positive int, got {num_threads!r}")
        if capture not in self.CAPTURES:
            raise ValueError(f"[Config] capture must be one of {self.CAPTURES}, got {capture!r}")
        if not isinstance(max_variants, int) or max_variants < 1:
            raise ValueError(f"[Config] max_variants must be a positive int, got {max_variants!r}")
        self.fusion_level = fusion_level
        self.memory_arena = bool(memory_arena)
        self.num_threads = num_threads
        self.dynamic = {}
        self.disable_passes = tuple(disable_passes)
        self.max_variants = max_variants
        self.verify = bool(verify)
        self.poison = bool(poison)
        self.remat = bool(remat)
        self.capture = capture
        self.channels_last = bool(channels_last)
        self.fuse_attention = bool(fuse_attention)
        self.winograd = bool(winograd)
        self.memory_budget = None
        if memory_budget is not None:
            self.set_memory_budget(memory_budget)
        for arg, dims in (dynamic or {}).items():
            if isinstance(dims, int):
                dims = {dims: (1, UNBOUNDED)}
            for d, rng in dims.items():
                lo, hi = rng if rng is not None else (1, UNBOUNDED)
                self.dynamic_dim(arg, d, lo, hi)

    def __setattr__(self, name, value):
        object.__setattr__(self, name, value)
        if not name.startswith("_") and name not in _NOT_PLANNED:
            self._changed(name)

    def _changed(self, what):
        """Setting `what` changed: the compiled functions using this config
        drop the plans they made under the old settings."""
        for user in list(self.__dict__.get("_users", ())):
            user._config_changed(what)

    def _attach(self, user):
        """Register a compiled function that plans with this config."""
        users = self.__dict__.get("_users")
        if users is None:
            users = weakref.WeakSet()
            object.__setattr__(self, "_users", users)
        users.add(user)

    def __getstate__(self):  # a copy (or a pickle) serves no compiled function yet
        state = dict(self.__dict__)
        state.pop("_users", None)
        return state

    def enable_memory_arena(self, on=True):
        """Plan intermediates into one arena (True) or give each its own region."""
        self.memory_arena = bool(on)
        return self

    def set_fusion_level(self, level):
        """Validate and set the fusion level (0, 1 or 2)."""
        if level not in (0, 1, 2):
            raise ValueError(f"[Config] fusion_level must be 0, 1 or 2, got {level!r}")
        self.fusion_level = level
        return self

    def set_memory_budget(self, nbytes):
        """Validate and set the memory budget in bytes (None: no limit)."""
        if nbytes is not None and (isinstance(nbytes, bool) or not isinstance(nbytes, int) or
                                   nbytes < 1):
            raise ValueError(f"[Config] memory_budget must be a positive number of bytes or "
                             f"None, got {nbytes!r}")
        self.memory_budget = nbytes
        return self

    def set_num_threads(self, n):
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"[Config] num_threads must be a positive int, got {n!r}")
        self.num_threads = n
        return self

    def dynamic_dim(self, arg, dim, min=1, max=UNBOUNDED):
        """Let dim `dim` of argument `arg` (name or position) vary in [min, max]."""
        if not isinstance(dim, int) or not isinstance(min, int) or not isinstance(max, int) \
                or min < 0 or max < min:
            raise ValueError(f"[Config.dynamic_dim] bad dim/range {dim!r}, ({min!r}, {max!r})")
        self.dynamic.setdefault(arg, {})[dim] = (min, max)
        self._changed("dynamic")
        return self

    def disable_pass(self, name):
        self.disable_passes = self.disable_passes + (name,)
        return self

    def passes_off(self):
        """The passes a build skips, comma-separated (None: none):
        disable_passes, and the remat pass under remat=False."""
        off = self.disable_passes + (() if self.remat or "remat" in self.disable_passes
                                     else ("remat",))
        return ",".join(off) or None

    def __repr__(self):
        return (f"musa.Config(fusion_level={self.fusion_level}, memory_arena={self.memory_arena}, "
                f"num_threads={self.num_threads}, dynamic={self.dynamic}, "
                f"disable_passes={self.disable_passes}, max_variants={self.max_variants}, "
                f"capture={self.capture!r}, channels_last={self.channels_last}, "
                f"fuse_attention={self.fuse_attention}, winograd={self.winograd})")
