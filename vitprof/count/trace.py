"""What a recognizer reading the data flow needs from a counted forward: the :class:`Trace`.

The counter keeps, per forward record, which records produced its inputs (followed through views
and free ops by storage), the parameters it reads, and those that reach it only through free ops
(an expanded class token joined by ``cat``, a bias table read by ``index``): the first record
consuming such a free op's output carries them. It also keeps which of those producers reach it
only as indices: through an integer tensor (``topk``'s or ``argsort``'s indices, fed to
``gather`` or ``index_select`` or used to index), which chooses elements and gives none of their
values (a boolean mask is no index), and which columns of its producers' outputs an input reads
when it reads only some (a split, chunk or slice of a fused projection's output), and whether
it reads the model's input data itself (the forward's tensors, their views or free ops' copies
of them). Indices are those of ``Run.ops``, whose forward records come first.
"""

from __future__ import annotations

from dataclasses import dataclass

from vitprof.core.records import Component, OpKind


@dataclass(frozen=True, slots=True)
class Step:
    """One forward record as the data flow sees it."""

    op: str  # e.g. "aten.addmm"
    module: str  # path of the innermost running module
    params: tuple[str, ...]  # parameters it reads
    carried: tuple[str, ...]  # parameters reaching it through free ops only
    sources: tuple[int, ...]  # indices of the records that produced its inputs
    shape: tuple[int, ...]  # shape of its (first) output
    macs: int
    fixed: Component | None  # the component a fused op named for this part of it, else None
    beside: tuple[int, ...] = ()  # producers of inputs that are not operands (an attention mask)
    indexed: tuple[int, ...] = ()  # the sources reaching it only as indices (integer tensors)
    operand: tuple[int, ...] = ()  # shape of its first input tensor (a convolution's map)
    # (source, first, stop) per input that reads only columns first..stop-1 of the last
    # dimension of the output of one record, ``source`` (a view or copy of a split of it)
    parts: tuple[tuple[int, int, int], ...] = ()
    # those of ``carried`` that reach it only beside its operands (a bias table as a mask)
    carried_beside: tuple[str, ...] = ()
    # those of ``carried`` in an operand that records wrote too: a parameter concatenated to
    # activations (memory key/values joined to the keys), which extends them and weights nothing
    carried_joined: tuple[str, ...] = ()
    # the producers of each operand that several records wrote: a weight computed by records
    # (memory key/values normalised) concatenated to activations in one operand
    joined: tuple[tuple[int, ...], ...] = ()
    # an operand no record, parameter or parameter carried through free ops made: the model's
    # input data (a patch mask), or a constant made in the forward
    unsourced: bool = False
    # an operand is the model's input data itself: a tensor passed to the forward, a view of it
    # or a copy a free op made of it (no record computed it, unlike an input's projection)
    fed: bool = False
    kind: OpKind = OpKind.OTHER  # what the op is (its formula's registration), never its name
    # the running modules, outermost first, each with the ordinal of its call among the
    # forward's module calls: the records of two calls of one module (a decoder layer run step
    # by step in a loop) differ here, whatever their paths
    calls: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Trace:
    """The forward records of a run (``steps``), and per record of ``Run.ops`` the index of the
    forward record it belongs to (``owners``: itself for a forward record, the record whose
    autograd node ran it for a backward one, None if unknown)."""

    steps: tuple[Step, ...]
    owners: tuple[int | None, ...]


@dataclass(frozen=True, slots=True)
class Whereabouts:
    """Where one record of ``Run.ops`` ran, for the recognize layer to place it: the paths of
    the running modules, innermost last (``stack``), the parameters it reads, the records that
    produced its inputs (forward), the forward record whose autograd node ran it (``owner``,
    backward; None if unknown or forward) and the component a fused op that spans components
    named for this part of it (``named``)."""

    stack: tuple[str, ...]
    params: tuple[str, ...]
    sources: tuple[int, ...]
    owner: int | None
    named: Component | None
