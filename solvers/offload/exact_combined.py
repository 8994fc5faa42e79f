"""Exact model of rematerialization combined with offloading, for small chains (exact for the class below).

The two-stream model of `solvers.offload.simulator` is solved exactly over the class

    **phase-form compute sequences x one optional Off/Pre pair per idle gap of a value.**

1. *Compute sequences* (enumerated). Phases k = L, L-1, .., 0 end with the Loss (k = L) or
   B(k); inside phase k forward ops run in increasing stage order, each stage at most once,
   stages 0..min(k, L-1), and stage k of phase k < L only runs F_all (the phase model of
   `solvers.chain.exact_model`, with those of its dominance rules that hold with a host link:
   F_n(j) only when it frees a standalone a_j, never F_n(0), and no second copy of a live
   value). The chain's "no F_ck(j) while the tape abar_{j+1} lives" does not hold: with the
   tape on the host, recomputing a_{j+1} can beat fetching it back, so such sequences are
   enumerated, and their model asks the tape to travel (`tapes_to_move`). Every persistent
   (rotor) schedule, hence every schedule of rotor, pofo, rotor-offload and the store-all
   order, has this form.
2. *Transfers* (CP-SAT, for one fixed sequence). A lifetime of a value v (a_j standalone or
   the tape abar_j: from the op that creates it, or time 0 for a_0, to the op that frees it)
   is used by its creator and its readers u_0, u_1, ..; in every gap (u_a, u_b) between
   consecutive uses the model may offload v (and must fetch it back: an Off with no later Pre
   acts as a delete, which the chain model has no op for, so such schedules are outside):
   ``Off(v)`` starts at so >= s(u_a) (and >= the end of the creator), lasts T(v) (0 when an
   earlier Off of the same value already left a host copy: the simulator's free Off), the
   device copy is released at r = max(so + T, e(u_a)), and ``Pre(v)`` runs in [sp, sp + T(v)) with r <= sp and
   sp + T(v) <= s(u_b). Transfers share one stream (NoOverlap; a free Off may not fall
   strictly inside another transfer, where the simulator would delay it).
3. *Memory* (Cumulative, capacity M): every value is charged exactly as the simulator does,
   on half-open intervals (releases before allocations at equal times): a lifetime from the
   start of its creator (0 for a_0) to the end of the op that frees it, minus the offloaded
   windows [r, sp); gradients delta_i from the start of their producer to the end of
   B(i-1) (delta_0 to the end); overheads o_fa (F_all) / o_fn (F_ck, F_n) / o_b while their op runs.
4. *Objective*: the end of B(0), in ticks (integer times: durations and transfer times
   must be whole ticks for the model to be exact; `scale` ticks per time unit). Durations are
   rounded up; every compute op lasts at least one tick, even one of no time (the Cumulative
   charges no zero-length interval, the simulator charges such an op its memory), and so does
   every paid transfer (`offload.cpsat.duration_ticks`). The default tick is the one of
   `offload.cpsat` (`fit_scale`: coarser when the instance would exceed 10^9 ticks).

The sequences are tried by increasing total compute time (a lower bound of their
makespan); the search stops when that sum reaches the best makespan found, each CP-SAT call
asking for a strict improvement. The best solution becomes an `OffloadSchedule` in start-time
order with every op pinned (``not_before`` = its start), replayed by `simulate`.

**Status**: "optimal" only for the class above, with exact sizes (``slots=0``) and whole-tick
durations (the ticks the model used, so an op of no time, given one tick, is not whole), when
every CP-SAT call was proven (optimal or infeasible) and the replay equals the model's makespan;
otherwise "feasible". A model schedule the simulator rejects (a modelling bug) is never raised:
the answer is the seed's schedule (``feasible``), else ``timeout``, with ``details.model_invalid``.
Sizes are rounded up to slots when ``slots > 0`` (the schedule still fits the real budget). With
exact sizes the exact layer also seeds from pofo at exact sizes, within the time limit
(`exact_free_hint.exact_size_seed`): the answer is never slower than pofo at exact sizes when that ran.
Exponential in L: meant for L <= 4 or 5.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ortools.sat.python import cp_model

from ..chain.schedule import F_ALL, F_CK, F_N, LOSS, B, Bwd, F_all, F_ck, F_n, Loss, Op
from ..chain.simulator import op_cost
from ..discretize import capacity as discretize_capacity
from ..discretize import effective_slots, scope_text, size_in_slots, tick_scale
from ..errors import InputError
from ..exact.cpsat_runner import check_first, run_cpsat
from ..exact.layer import exact_solver, same_or_less
from ..exact.options import CPSAT_MEMORY, Deadline, ExactOptions, refuses
from ..result import FEASIBLE, INFEASIBLE, OPTIMAL, TIMEOUT, SolveResult
from .cpsat import check_scale, duration_ticks, fit_scale, ticks_exact
from .exact_free_hint import exact_size_seed
from .instance import OffloadInstance
from .schedule import Off, OffloadSchedule, Pre, Transfer
from .simulator import simulate

#: Largest chain accepted (the enumeration is exponential in L).
MAX_LENGTH = 6

Value = tuple[str, int]


def op_ticks(chain: Any, kind: str, i: int, scale: float) -> int:
    """Ticks of compute op `kind`(i) (per-mode time, as the simulator), rounded up and at least one."""
    return duration_ticks(op_cost(chain, kind, i)[2], scale, least=1)


def transfer_ticks(inst: OffloadInstance, size: int, scale: float) -> int:
    """Ticks of a paid transfer of `size` bytes, rounded up; at least one when it takes any time."""
    return duration_ticks(inst.transfer_time(size), scale)


def whole_ticks(inst: OffloadInstance, scale: float) -> bool:
    """Whether every duration the model uses (compute ops per mode, transfers of every a_j, abar_j) is its
    tick count exactly (`op_ticks`, `transfer_ticks`): an op of no time, given one tick, is not."""
    chain = inst.chain
    L = chain.length
    computes = [float(t) for t in (*chain.u_fa[:L], *chain.u_fn[:L], *chain.u_b[: L + 1])]
    sizes = [int(b) for b in (*chain.x[: L + 1], *chain.xbar[1: L + 1])]
    return all(ticks_exact(t, scale, duration_ticks(t, scale, least=1)) for t in computes) and all(
        ticks_exact(inst.transfer_time(b), scale, transfer_ticks(inst, b, scale)) for b in sizes)


def phase_sequences(L: int, deadline: Deadline | None = None) -> list[tuple[Op, ...]]:
    """Every compute sequence of the phase form (see the module docstring): 2 248 for L = 4,
    84 152 for L = 5, 5.4 million for L = 6 (minutes and gigabytes; 992, 26 678 and 1.2 million
    with the chain's rule against F_ck(j) while abar_{j+1} lives). `deadline` is checked as they
    are enumerated (`DeadlineExceeded`). The sequences of `phase_codes`, as tuples of ops."""
    table, codes = phase_codes(L, deadline)
    return [tuple(table[c] for c in code) for code in codes]


def phase_codes(L: int, deadline: Deadline | None = None) -> tuple[tuple[Op, ...], list[bytes]]:
    """The sequences of `phase_sequences` in their compact form: (the op of each code, one `bytes`
    per sequence, byte n the code of its n-th op), in the same order. A `bytes` is one object that
    the garbage collector does not track (a list or tuple of `Op` is tracked, with its ops): the
    full collections while millions of them piled up took half of a cut-short enumeration's time,
    and the list is freed as soon as it is dropped (`_Phases`)."""
    enum = _Phases(L, deadline)
    enum.phase(L, frozenset({0}), frozenset(), 0, b"")
    return enum.table, enum.out


class _Phases:
    """The enumeration of `phase_codes`. A method, not a closure: a nested recursive function is a
    reference cycle (the function and the cell that names it) that kept the sequences alive after the
    enumeration, returned or cut short by the deadline, until a full collection, often the interpreter's
    teardown (seconds after the answer for L = 6)."""

    __slots__ = ("L", "deadline", "calls", "out", "table", "fa", "fc", "fn", "bwd", "loss")

    def __init__(self, L: int, deadline: Deadline | None) -> None:
        self.L, self.deadline, self.calls = L, deadline, 0
        self.out: list[bytes] = []
        #: code -> op: F_all(0..L-1), F_ck(0..L-1), F_n(0..L-1), B(0..L-1), then the Loss (4L + 1 <= 256 codes)
        self.table: tuple[Op, ...] = (*(F_all(j) for j in range(L)), *(F_ck(j) for j in range(L)),
                                      *(F_n(j) for j in range(L)), *(Bwd(k) for k in range(L)), Loss(L))
        self.fa, self.fc, self.fn, self.bwd = ([bytes((base * L + j,)) for j in range(L)] for base in range(4))
        self.loss = bytes((4 * L,))

    def phase(self, k: int, acts: frozenset[int], tapes: frozenset[int], stage: int, ops: bytes) -> None:
        """Extend `ops` (in phase k; stages `acts` hold a_j, `tapes` hold abar_j; the next forward at a stage
        >= `stage`) in every way, each complete sequence appended to `out`."""
        L = self.L
        self.calls += 1
        if self.deadline is not None and self.calls % 1024 == 0:
            self.deadline.check()
        # close the phase here
        if k == L:
            if L in acts or L in tapes:
                self.phase(L - 1, acts - {L}, tapes, 0, ops + self.loss)
        elif (k in acts or k in tapes) and k + 1 in tapes:
            nxt = ops + self.bwd[k]
            if k == 0:
                self.out.append(nxt)
            else:
                self.phase(k - 1, acts - {k}, tapes - {k + 1}, 0, nxt)
        # or run one more forward op at a stage >= `stage`
        for j in range(stage, min(k, L - 1) + 1):
            if j not in acts and j not in tapes:
                continue
            if j + 1 not in tapes:
                self.phase(k, acts, tapes | {j + 1}, j + 1, ops + self.fa[j])
            if j == k or j + 1 in acts:
                continue
            # F_ck(j) even while the tape abar_{j+1} lives: with a host link the tape may be away (the
            # chain model's rule against it does not hold; `_Model` asks such a tape to travel)
            self.phase(k, acts | {j + 1}, tapes, j + 1, ops + self.fc[j])
            if j in acts and j > 0:
                self.phase(k, (acts - {j}) | {j + 1}, tapes, j + 1, ops + self.fn[j])


def tapes_to_move(ops: Sequence[Op]) -> set[int]:
    """Indices i of the tapes abar_i alive while F_ck(i-1) runs: such a sequence is kept only when
    abar_i travels (`_Model`), for with abar_i on the device all the time the sequence without that
    F_ck (a_i read from the tape) is at most as slow and as high, and is enumerated too."""
    tapes: set[int] = set()
    out: set[int] = set()
    for kind, i in ops:
        if kind == F_ALL:
            tapes.add(i + 1)
        elif kind == F_CK and i + 1 in tapes:
            out.add(i + 1)
        elif kind == B:
            tapes.discard(i + 1)
    return out


def lifetimes(L: int, ops: Sequence[Op]) -> tuple[list[tuple[Value, int, list[int], int | None]],
                                               list[tuple[int, int, int | None]]]:
    """(value, creator position (-1: a_0 at time 0), reader positions, freeing position or None)
    per lifetime of a_j / abar_j, and (index i, producer, freeing position) per gradient."""
    acts, tapes = {0}, set()
    live: dict[Value, tuple[int, list[int]]] = {("a", 0): (-1, [])}
    done: list[tuple[Value, int, list[int], int | None]] = []
    grads: dict[int, list[Any]] = {}

    def free(v: Value, pos: int) -> None:
        creator, readers = live.pop(v)
        done.append((v, creator, readers, pos))

    for pos, (kind, i) in enumerate(ops):
        i = L if kind == LOSS else i
        live[("a", i) if i in acts else ("abar", i)][1].append(pos)
        if kind == B:
            live[("abar", i + 1)][1].append(pos)
            grads[i + 1][2] = pos
        if kind in (B, LOSS):
            grads[i] = [i, pos, None]
        if kind == F_ALL:
            tapes.add(i + 1)
            live[("abar", i + 1)] = (pos, [])
        elif kind in (F_CK, F_N):
            acts.add(i + 1)
            live[("a", i + 1)] = (pos, [])
            if kind == F_N:
                acts.discard(i)
                free(("a", i), pos)
        elif kind == B:
            tapes.discard(i + 1)
            free(("abar", i + 1), pos)
            if i in acts:
                acts.discard(i)
                free(("a", i), pos)
        elif kind == LOSS and L in acts:
            acts.discard(L)
            free(("a", L), pos)
    done += [(v, c, r, None) for v, (c, r) in live.items()]
    return done, [tuple(g) for g in grads.values()]


class _Model:
    """The CP-SAT model of one compute sequence (parts 2-4 of the module docstring)."""

    def __init__(self, inst: OffloadInstance, ops: Sequence[Op], size, capacity: int, scale: float,
                 cutoff: int | None) -> None:
        chain = inst.chain
        L = chain.length
        self.ops = ops
        self.L, self.scale = L, scale
        n = len(ops)
        d = [op_ticks(chain, kind, i, scale) for kind, i in ops]  # per-mode forward times, as the simulator
        T = {("a", j): transfer_ticks(inst, int(chain.x[j]), scale) for j in range(L + 1)}
        T.update({("abar", j): transfer_ticks(inst, int(chain.xbar[j]), scale) for j in range(1, L + 1)})
        real = {("a", j): int(chain.x[j]) for j in range(L + 1)}
        real.update({("abar", j): int(chain.xbar[j]) for j in range(1, L + 1)})
        lives, grads = lifetimes(L, ops)
        must_move = tapes_to_move(ops)
        #: False when a tape of `tapes_to_move` cannot travel (no bytes or no transfer time): a dominated sequence
        self.useful = True
        gaps = sum(len(r) for _, _, r, _ in lives)
        horizon = sum(d) + 2 * gaps * max(T.values(), default=0) + 1
        m = cp_model.CpModel()
        self.m = m
        s = [m.new_int_var(0, horizon, f"s{k}") for k in range(n)]
        e = [m.new_int_var(0, horizon, f"e{k}") for k in range(n)]
        for k in range(n):
            m.add(e[k] == s[k] + d[k])
            if k:
                m.add(s[k] >= e[k - 1])
        self.s, self.e = s, e
        ivs: list[Any] = []
        dem: list[int] = []

        def hold(start, end, demand: int, name: str, present=None) -> None:
            if demand <= 0:
                return
            length = m.new_int_var(0, horizon, f"len_{name}")
            if present is None:
                ivs.append(m.new_interval_var(start, length, end, name))
            else:
                ivs.append(m.new_optional_interval_var(start, length, end, present, name))
            dem.append(demand)

        for k, (kind, i) in enumerate(ops):
            over = (chain.o_fa[i] if kind == F_ALL else chain.o_fn[i] if kind in (F_CK, F_N)
                    else chain.o_b[L if kind == LOSS else i])  # per mode, as the simulator
            hold(s[k], e[k], size(int(over)), f"over{k}")
        for i, prod, freer in grads:
            hold(s[prod], e[freer] if freer is not None else e[n - 1], size(int(chain.x[i])), f"grad{i}")

        zero = m.new_constant(0)
        self.transfers: list[tuple[Any, Any, Any, Value]] = []  # (present, off start, pre start, v)
        stream: list[Any] = []
        frees: list[tuple[Any, Any]] = []  # (free-off indicator, its time)
        stream_ends: list[tuple[Any, Any, Any]] = []  # (present, start, end) of every transfer
        offs_of: dict[Value, list[Any]] = {}
        for g, (v, creator, readers, freer) in enumerate(lives):
            sz = size(real[v])
            born = s[creator] if creator >= 0 else zero
            dies = e[freer] if freer is not None else e[n - 1]
            if creator >= 0:
                hold(born, e[creator], sz, f"c{g}")
            for k in readers:
                hold(s[k], e[k], sz, f"r{g}_{k}")
            prev_end = e[creator] if creator >= 0 else zero
            prev_start = s[creator] if creator >= 0 else zero
            moves: list[Any] = []  # the Off/Pre indicators of this lifetime
            for q, u in enumerate(readers):
                name = f"g{g}_{q}"
                can = sz > 0 and T[v] > 0
                if not can:
                    hold(prev_end, s[u], sz, name)
                else:
                    o = m.new_bool_var(f"o_{name}")
                    hold(prev_end, s[u], sz, name, o.negated())
                    earlier = offs_of.setdefault(v, [])
                    h = m.new_bool_var(f"h_{name}")
                    if earlier:
                        m.add_max_equality(h, earlier)
                    else:
                        m.add(h == 0)
                    paid = m.new_bool_var(f"paid_{name}")
                    m.add_bool_and([o, h.negated()]).only_enforce_if(paid)
                    m.add_bool_or([o.negated(), h]).only_enforce_if(paid.negated())
                    free_off = m.new_bool_var(f"free_{name}")
                    m.add_bool_and([o, h]).only_enforce_if(free_off)
                    m.add_bool_or([o.negated(), h.negated()]).only_enforce_if(free_off.negated())
                    earlier.append(o)
                    so = m.new_int_var(0, horizon, f"so_{name}")
                    oe = m.new_int_var(0, horizon, f"oe_{name}")
                    sp = m.new_int_var(0, horizon, f"sp_{name}")
                    r = m.new_int_var(0, horizon, f"rel_{name}")
                    m.add(oe == so + T[v]).only_enforce_if(paid)
                    m.add(oe == so).only_enforce_if(paid.negated())
                    m.add_max_equality(r, [oe, prev_end])
                    m.add(so >= prev_start).only_enforce_if(o)
                    if creator >= 0:
                        m.add(so >= e[creator]).only_enforce_if(o)
                    m.add(sp >= r).only_enforce_if(o)
                    m.add(sp + T[v] <= s[u]).only_enforce_if(o)
                    m.add(so == 0).only_enforce_if(o.negated())
                    m.add(sp == 0).only_enforce_if(o.negated())
                    stream.append(m.new_optional_interval_var(so, T[v], so + T[v], paid, f"off_{name}"))
                    pe = m.new_int_var(0, horizon, f"pe_{name}")
                    m.add(pe == sp + T[v])
                    stream.append(m.new_optional_interval_var(sp, T[v], pe, o, f"pre_{name}"))
                    stream_ends.append((paid, so, oe))
                    stream_ends.append((o, sp, pe))
                    frees.append((free_off, so))
                    hold(prev_end, r, sz, f"{name}A", o)
                    hold(sp, s[u], sz, f"{name}B", o)
                    self.transfers.append((o, so, sp, v))
                    moves.append(o)
                prev_end, prev_start = e[u], s[u]
            if freer is None:
                hold(prev_end, dies, sz, f"tail{g}")
            if v[0] == "abar" and v[1] in must_move:
                if moves:
                    m.add_bool_or(moves)
                else:
                    self.useful = False
        m.add_no_overlap(stream)
        # a free Off is never strictly inside another transfer (the simulator would delay it)
        for f, t in frees:
            for present, a, b in stream_ends:
                if b is t:
                    continue
                before = m.new_bool_var("")
                m.add(t <= a).only_enforce_if(before)
                m.add(t >= b).only_enforce_if([f, present, before.negated()])
        m.add_cumulative(ivs, dem, capacity)
        if cutoff is not None:
            m.add(e[n - 1] <= cutoff)
        m.minimize(e[n - 1])

    def schedule(self, solver: cp_model.CpSolver) -> OffloadSchedule:
        """The solution as an `OffloadSchedule` in start-time order, every op pinned (``not_before`` = its start,
        in time units); at equal ticks compute ops first, then Offs (free ones first), then Pres, except that a
        free Off goes before the compute op starting at its tick unless that op reads its value (`free_off_first`)."""
        timed: list[tuple[int, int, int, int, Op | Transfer]] = []
        starting: dict[int, list[Op]] = {}
        for k, op in enumerate(self.ops):
            timed.append((solver.value(self.s[k]), 0, 0, k, op))
            starting.setdefault(timed[-1][0], []).append(op)
        for n, (o, so, sp, v) in enumerate(self.transfers):
            if solver.value(o):
                t_off, t_pre = solver.value(so), solver.value(sp)
                if not _is_free(self, solver, n):
                    timed.append((t_off, 1, 1, n, Off(*v)))
                else:
                    timed.append((t_off, -1 if free_off_first(v, starting.get(t_off, []), self.L) else 1, 0, n,
                                  Off(*v)))
                timed.append((t_pre, 2, 0, n, Pre(*v)))
        timed.sort(key=lambda item: item[:4])
        return OffloadSchedule([item[4] for item in timed], self.L, [item[0] / self.scale for item in timed])


#: the offloading problem's fast solvers: they seed and referee the exact model
FAST = ("pofo", "rotor-offload", "remat-only", "offload-prefix", "vdnn", "none")


def check_instance(inst: OffloadInstance, **options: Any) -> None:
    """Before any work (the warm start's fast solvers included): a chain of at most `MAX_LENGTH`
    stages (the compute sequences are enumerated), and the ``scale`` option (`check_scale`); else
    `InputError` naming the chain's ``stages`` or the option."""
    L = inst.chain.length
    if L > MAX_LENGTH:
        raise InputError(f"chain {inst.chain.name!r} has L = {L} stages; exact-combined enumerates compute "
                         f"sequences, L <= {MAX_LENGTH} (offload-exact or pofo take longer chains)", field="stages")
    check_scale(inst, **options)


@refuses("exact-combined", "memory_gb", why=CPSAT_MEMORY)
@check_first(check_instance)
@exact_solver("offload", "exact-combined", FAST, time_limit=60.0, workers=4, slots=0,
              least=lambda inst: inst.chain.total_time(), reseed=exact_size_seed)
def solve_exact_combined(inst: OffloadInstance, budget: int, *, options: ExactOptions, deadline: Deadline,
                         seed: SolveResult | None = None, scale: float | None = None, **_: Any) -> SolveResult:
    """Exact CP-SAT model of rematerialization + offloading, optimal for its class (see the module docstring);
    sizes exact by default (``slots=0``), 4 workers, 60 s. `scale`: ticks per time unit (default:
    exact when durations allow, about 1000 ticks for the longest otherwise; given, as
    `offload.cpsat.check_scale` accepts)."""
    chain = inst.chain
    L = chain.length
    budget = int(budget)
    slots = effective_slots(budget, options.slots)
    times = [float(t) for t in (*chain.u_fa, *chain.u_fn, *chain.u_b)] + [
        inst.transfer_time(int(b)) for b in (*chain.x[: L + 1], *chain.xbar[1: L + 1])]
    if scale is None:
        scale = fit_scale(inst, tick_scale(times, max_ticks=1000)[0])
    exact_ticks = slots == 0 and whole_ticks(inst, scale)
    size = size_in_slots(budget, slots)
    capacity = discretize_capacity(budget, slots)
    scope = ("phase-form compute sequences (each stage at most once per phase) with at most one Off/Pre pair "
             "per idle gap of each value (every offloaded value fetched back: an Off never followed by a Pre acts "
             "as a delete, which the model has no op for), "
             f"times in ticks of 1/{scale:g}, {scope_text(slots)}")
    common: dict[str, Any] = {"problem": "offload", "solver": "exact-combined", "budget": budget, "scope": scope}

    table, seqs = phase_codes(L, deadline)  # sequences as codes: compact, untracked by the GC (`phase_codes`)
    ticks = [op_ticks(chain, kind, i, scale) for kind, i in table]

    def compute_ticks(code: bytes) -> int:
        return sum(ticks[c] for c in code)

    def op_floor(code: bytes) -> int:
        """The most any op needs on the device whatever travels: what it reads, what it
        allocates (output and overhead) and the live gradient (gradients never travel)."""
        worst = grad = 0
        acts: set[int] = {0}
        for kind, i in map(table.__getitem__, code):
            i = L if kind == LOSS else i
            act = size(int(chain.x[i])) if i in acts else size(int(chain.xbar[i]))
            if kind in (F_ALL, F_CK, F_N):
                out = chain.xbar[i + 1] if kind == F_ALL else chain.x[i + 1]
                over = chain.o_fa[i] if kind == F_ALL else chain.o_fn[i]
                need = act + size(int(out)) + size(int(over)) + grad
                if kind in (F_CK, F_N):
                    acts.add(i + 1)
                    if kind == F_N:
                        acts.discard(i)
            else:
                need = act + size(int(chain.x[i])) + size(int(chain.o_b[i]))
                if kind == B:
                    need += size(int(chain.xbar[i + 1])) + size(int(chain.x[i + 1]))
                acts.discard(i)
            worst = max(worst, need)
            if kind in (B, LOSS):
                grad = size(int(chain.x[i]))
        return worst

    ranked = []
    for k, o in enumerate(seqs):
        if k % 1024 == 0:
            deadline.check()
        if op_floor(o) <= capacity:
            ranked.append((compute_ticks(o), k))
    order = sorted(ranked)
    best: tuple[int, tuple[Op, ...], Any, _Model] | None = None
    proven = True
    solved = 0
    for lb, k in order:
        if best is not None and lb >= best[0]:
            break
        if deadline.expired():
            proven = False
            break
        ops = tuple(table[c] for c in seqs[k])
        model = _Model(inst, ops, size, capacity, scale, None if best is None else best[0] - 1)
        if not model.useful:
            continue
        run = run_cpsat(model.m, deadline, options, progress=False)
        solved += 1
        if run.status in (OPTIMAL, FEASIBLE) and run.objective is not None:
            best = (int(round(run.objective)), ops, run.solver, model)
            if run.status != OPTIMAL:
                proven = False
        elif run.status != INFEASIBLE:
            proven = False
    details: dict[str, Any] = {"sequences": len(seqs), "cpsat_calls": solved, "scale": scale}
    if best is None:
        if proven:
            return SolveResult(status=INFEASIBLE, details=details,
                               message=f"no schedule of this class fits {budget}"
                               + (f" (sizes rounded up to {slots} slots)" if slots else ""), **common)
        return SolveResult(status=TIMEOUT, details=details,
                           message="no schedule within the time limit", **common)
    obj, ops, solver, model = best
    schedule = model.schedule(solver)
    sim = simulate(inst, schedule, budget)
    model_makespan = obj / scale
    details.update({"model_makespan": model_makespan, "transfers": len(schedule.transfers()),
                    "host_peak": sim.host_peak})
    if not sim.valid:  # a modelling bug: the simulator's verdict wins, the answer falls back on the seed
        return _invalid_answer(sim.violation, seed, details, common)
    # relative (`same_or_less`, no absolute floor): with times of 1e-12 units a floor of 1e-9 passes any disagreement
    agrees = same_or_less(sim.makespan, model_makespan) and same_or_less(model_makespan, sim.makespan)
    optimal = proven and exact_ticks and agrees
    return SolveResult(status=OPTIMAL if optimal else FEASIBLE, objective=sim.makespan,
                       peak_memory=sim.peak_memory, lower_bound=model_makespan if (proven and exact_ticks) else None,
                       schedule=schedule, details=details, **common)


def _invalid_answer(violation: Any, seed: SolveResult | None, details: dict[str, Any], common: dict[str, Any]
                    ) -> SolveResult:
    """The answer when the simulator rejects the model's schedule (never expected): the seed's schedule
    (``feasible``), else no schedule (``timeout``: nothing proven); never an exception. The message and
    ``details.model_invalid`` name the violation (as offload-exact's)."""
    details["model_invalid"] = str(violation)
    note = f"the model's schedule fails the simulator ({violation})"
    if seed is None or seed.schedule is None or seed.objective is None:
        return SolveResult(status=TIMEOUT, details=details,
                           message=f"{note}; no fast solver's schedule to return", **common)
    details["solution_from"] = f"{seed.solver} (exact sizes)" if seed.details.get("slots") == 0 else seed.solver
    return SolveResult(status=FEASIBLE, objective=seed.objective, peak_memory=seed.peak_memory, lower_bound=None,
                       schedule=seed.schedule, details=details,
                       message=f"{note}; returned {details['solution_from']}'s schedule", **common)


def free_off_first(v: Value, starting: list[Op], L: int) -> bool:
    """Whether a free Off of `v` (no time: the host holds v already) is issued before the compute ops `starting` at
    its tick. The simulator releases such an Off in issue order among the ops starting then (docs/offload.md, rule
    6), while the models free v at the Off's start (half-open intervals): issued first, it frees v before they
    allocate. An op that reads v (stage v[1]'s input, or B(v[1] - 1)'s tape) must be issued before the Off, which then
    releases at that reader's end; the models charge v to the reader's end too."""
    def reads(op: Op) -> bool:
        kind, i = op
        i = L if kind == LOSS else i
        return i == v[1] or (kind == B and v == ("abar", i + 1))

    return not any(reads(op) for op in starting)


def _is_free(model: _Model, solver: cp_model.CpSolver, n: int) -> bool:
    """Whether the n-th optional Off of the model is a free one (an earlier Off left a host copy)."""
    v = model.transfers[n][3]
    return any(solver.value(o) for o, _, _, w in model.transfers[:n] if w == v)
