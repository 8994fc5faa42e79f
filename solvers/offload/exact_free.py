"""Exact CP-SAT model of rematerialization + offloading with a free compute order (`offload-exact`).

The compute order is the chain's **phase model** (`solvers.chain.exact_model`, docs/chain.md; without
its row "no F_ck(j) while abar_{j+1} lives", `chain_only`, which fails once tapes can travel):
the schedule is cut at its backward ops into phases k = L, L-1, .., 0 (phase L ends with the
Loss, phase k < L with B(k)); inside a phase each stage j runs at most one forward (F_all,
F_ck or F_n), in increasing stage order. So stage j may be computed up to L - j + 1 times
(once per phase k >= j): that is the recomputation cap of the class. The slots of all phases,
in their fixed order p = 0, 1, .., are the compute stream; a slot that runs no forward takes no
time. Every persistent (rotor) schedule, hence every schedule of rotor, pofo's DP and
rotor-offload, has this form.

Offloading, in pieces of time. Slot p gives two pieces: W_p = [s(p), e(p)) (its op) and
G_p = [e(p-1), s(p)) (the idle time before it). For every value v (standalone a_i, i = 0..L,
or tape abar_i) and piece q a Boolean ``w[v, q]`` says that v is *away* (on the host) then: v
is resident (the phase model's state before slot p) and not read by slot p. The two pieces of
an idle slot take the state of the piece after them (and the slot starts when the previous one
ends): no symmetric copies. A maximal run of away pieces q1..q2 is one Off/Pre pair:

    so + T(v) * paid <= start(q1)      the Off (and so the device copy's release) ends first
    so >= LU(v, p1 - 1)                after the last use before it (the start of a reader, the
                                       end of the creator, the end of an earlier Pre of v)
    sp >= end(q2),  sp + T(v) <= NU(v, .)   the Pre starts after the run, ends before the next
                                            reader of v starts
    NoOverlap(every Off and Pre interval)   one transfer stream

with at most one Off and one Pre of each value per phase (the intervals are per (v, phase)).
``paid`` is 0 when an Off of v ran in an earlier phase: the host holds a copy and the
simulator's Off is free (a zero-length interval, which NoOverlap keeps out of another
transfer, as the simulator would hold it back). Times are integer ticks; compute slots
``s(p+1) >= s(p) + d(p)`` with d(p) the duration of the op slot p runs (per mode for a forward:
``u_fa FA + u_fn (FC + FN)``, 0 when idle); objective: the end of B(0).

Memory: for each slot, the phase model's row (state before the slot + its output + its
overhead) minus the sizes of the values away in W_p, and the state alone minus those away in
G_p, are <= M. Between slots memory only drops, so the simulator's memory is never above the
rows: every schedule of the model replays within the budget.

**Class (scope)**: phase-form compute sequences; values on the host for whole pieces (released
before the piece starts, prefetched after it ends); at most one Off and one Pre of each value
per phase; every offloaded value fetched back (an Off with no later Pre acts as a delete, which
the phase model has no op for); whole-tick durations. `exact-combined` (small L) also lets a release or a prefetch
fall inside a compute op, so its class is wider. The reported ``lower_bound`` is the model's
(``details.model_bound``): a bound for this class, as the chain's phase model reports its own;
the exact layer drops it when a fast solver's schedule beats it.

Warm start (`exact_free_hint.complete_hint`): pofo's compute sequence solved with it fixed, then a
neighbourhood search over compute sequences (`exact_free_lns`); the best solution hints the full model.
"""

from __future__ import annotations

from typing import Any

from ortools.sat.python import cp_model

from ..chain.exact_model import Lin, PhaseModel, discretise
from ..chain.schedule import F_ALL, F_CK, F_N, Bwd, Loss, Op
from ..discretize import effective_slots, scope_text, tick_scale
from ..exact.cpsat_runner import ROW_LIMIT, check_first, check_parameters, fit_linear, max_row_sum, run_cpsat
from ..exact.layer import exact_solver, same_or_less
from ..exact.milp_runner import BackendRun
from ..exact.options import CPSAT_MEMORY, Deadline, ExactOptions, refuses
from ..result import FEASIBLE, INFEASIBLE, OPTIMAL, TIMEOUT, SolveResult
from .cpsat import check_scale, duration_ticks, fit_scale, ticks_exact
from .exact_combined import free_off_first
from .exact_free_cuts import add_link_bounds, run_edge
from .exact_free_hint import any_size_seed
from .instance import OffloadInstance
from .schedule import Off, OffloadSchedule, Pre, Transfer
from .simulator import simulate

Value = tuple[str, int]
#: the offloading problem's fast solvers, best first: they seed (CP-SAT hints) and referee the model
FAST = ("pofo", "rotor-offload", "remat-only", "offload-prefix", "vdnn", "none")
#: default memory discretisation (slots of budget / N bytes)
DEFAULT_SLOTS = 100
#: add the link-capacity rows of `exact_free_cuts` (valid for the class; see docs/offload.md)
LINK_ROWS = True


def chain_only(row_name: str) -> bool:
    """Whether a row of the chain's phase model holds only without a host link: "no F_ck(j) while the
    tape abar_{j+1} lives" (``FC[k,j] redundant``). With the tape on the host, recomputing a_{j+1} can
    beat fetching the tape back (docs/offload.md), and removing the F_ck leaves an idle slot whose
    pieces the class ties to the next one, so even "unless the tape travels" is not a safe form."""
    return row_name.startswith("FC[") and row_name.endswith("] redundant")


class Slot:
    """One position of the compute stream: phase k, stage j (None: the phase's backward op)."""

    __slots__ = ("k", "j", "n")

    def __init__(self, k: int, j: int | None, n: int) -> None:
        self.k, self.j, self.n = k, j, n


class FreeOrderModel:
    """The CP-SAT model of the module docstring for one (discretised) chain, budget M (model
    units) and tick scale."""

    def __init__(self, inst: OffloadInstance, dchain: Any, M: int, scale: float, deadline: Deadline,
                 link_rows: bool = False, round_up: bool = True) -> None:
        self.inst, self.dchain, self.M, self.scale = inst, dchain, M, scale
        self.seed_x: list[bool] = []  # the seed's compute sequence in the phase model's Booleans (warm start)
        self.warm_notes: dict[str, Any] = {}  # what the warm start's stages found (exact_free_hint.complete_hint)
        chain = inst.chain
        L = chain.length
        self.L = L
        pm = PhaseModel.build(dchain, M, deadline=deadline)
        self.pm = pm
        cp = cp_model.CpModel()
        self.cp = cp
        self.x = [cp.new_bool_var(f"{k[0]}_{k[1]}_{k[2]}") for k in pm.keys]
        for n, row in enumerate(pm.rows):
            if n % 2048 == 0:
                deadline.check()
            if row.name.startswith("memory"):
                continue  # rebuilt below with the away terms
            if chain_only(row.name):
                continue
            expr = self.lin(row.expr)
            if row.lo is not None:
                cp.add(expr >= int(round(row.lo)))
            if row.hi is not None:
                cp.add(expr <= int(round(row.hi)))
        self.infeasible = pm.trivially_infeasible if not pm.trivially_infeasible.startswith("memory") else ""
        # the compute stream
        self.slots: list[Slot] = []
        for k in range(L, -1, -1):
            for j in pm.slots(k):
                self.slots.append(Slot(k, j, len(self.slots)))
            self.slots.append(Slot(k, None, len(self.slots)))
        P = len(self.slots)
        d = [self.duration(sl) for sl in self.slots]
        # a paid transfer lasts at least one tick (`duration_ticks`): a zero-tick Pre would tie with a later Off of
        # its value in the schedule's order (a link of 2^50 bytes/s moves a value in far less than a tick)
        T = {v: duration_ticks(inst.transfer_time(self.real_size(v)), scale) for v in self.values()}
        self.T = T
        horizon = sum(d) + 2 * (L + 1) * sum(T.values()) + 1
        self.horizon = horizon
        self.s = [cp.new_int_var(0, horizon, f"s{p}") for p in range(P)]
        self.R: list[Any] = []
        for sl in self.slots:
            self.R.append(1 if sl.j is None else self.lin(pm.run(sl.k, sl.j)))
        tk = [(duration_ticks(float(a), scale), duration_ticks(float(n), scale))
              for a, n in zip(chain.u_fa, chain.u_fn)]
        self.e = [self.s[p] + (d[p] if sl.j is None else self.lin(pm.forward_time(sl.k, sl.j, *tk[sl.j])))
                  for p, sl in enumerate(self.slots)]  # slot ends (= start when idle); forwards per mode
        for p in range(P - 1):
            cp.add(self.s[p + 1] >= self.e[p])
        self.end = self.e[P - 1]
        self.d = d
        self.memory_rows: list[Any] = []  # the memory rows of `_away` (CP-SAT constraints)
        self._away(deadline)
        # CP-SAT 9.15's presolve overflows past 2^31 (`cpsat_runner.ROW_LIMIT`): memory rows in bytes
        # (slots=0) in a coarser unit, exact by their gcd, else rounded up (`round_up`: every plan fits
        # the budget) or down (a relaxation: its infeasibility and bound hold for the exact rows)
        self.rows_exact = all([fit_linear(cp, ct, up=round_up) for ct in self.memory_rows])
        self.link_rows = add_link_bounds(self) if link_rows else []  # optional redundant rows (exact_free_cuts)
        cp.minimize(self.end)

    # ------------------------------------------------------------------ helpers
    def lin(self, e: Lin | int | None) -> Any:
        """A phase-model expression as a CP-SAT linear expression."""
        if e is None:
            return 0
        if not isinstance(e, Lin):
            return int(e)
        return sum(int(round(c)) * self.x[v] for v, c in e.terms.items() if c) + int(round(e.const))

    def values(self) -> list[Value]:
        """Every value that may travel: a_0..a_L and abar_1..abar_L."""
        return [("a", i) for i in range(self.L + 1)] + [("abar", i) for i in range(1, self.L + 1)]

    def real_size(self, v: Value) -> int:
        """Bytes of v on the real chain."""
        c = self.inst.chain
        return int(c.xbar[v[1]] if v[0] == "abar" else c.x[v[1]])

    def size(self, v: Value) -> int:
        """Size of v in the model's unit (slots)."""
        return int(self.dchain.xbar[v[1]] if v[0] == "abar" else self.dchain.x[v[1]])

    def duration(self, sl: Slot) -> int:
        """Ticks of the op of slot `sl` when it runs (a forward: u_f, the larger of its modes)."""
        c = self.inst.chain
        if sl.j is None:
            return duration_ticks(float(c.u_b[sl.k]), self.scale)
        return duration_ticks(float(c.u_f[sl.j]), self.scale)

    def resident(self, sl: Slot) -> dict[Value, Lin | int]:
        """The phase model's state before slot `sl` (which values are resident, as 0/1 expressions)."""
        pm, L, k, j = self.pm, self.L, sl.k, sl.j
        res: dict[Value, Lin | int] = {("a", 0): 1}
        if j is not None:
            for i in range(1, L + 1):
                res[("a", i)] = pm.a_after(k, i) if i < j else pm.a_in(k, i) if i == j else pm.sa(k, i)
                res[("abar", i)] = pm.t_in(k, i) if i <= j else pm.st(k, i)
        elif k == L:
            for i in range(1, L):
                res[("a", i)] = pm.a_after(k, i)
            res[("a", L)] = Lin().add(pm.get("FC", L, L - 1)).add(pm.get("FN", L, L - 1))
            for i in range(1, L + 1):
                res[("abar", i)] = Lin().add(pm.get("FA", L, i - 1))
        else:
            for i in range(1, k):
                res[("a", i)] = pm.a_after(k, i)
            if k >= 1:
                res[("a", k)] = pm.a_in(k, k)
            for i in range(1, k + 2):
                res[("abar", i)] = pm.t_in(k, i)
        return {v: e for v, e in res.items() if not (isinstance(e, int) and e == 0)
                and not (isinstance(e, Lin) and not e.terms and e.const == 0)}

    # ------------------------------------------------------------------ offloading and memory
    def _memory_row(self, expr: Any, name: str) -> None:
        """The row ``expr <= M`` (model units) in `memory_rows`, which `fit_linear` rewrites in place. A row
        with no variable (every size in it 0 or its values never away, no mode choice) is a Python int:
        ``int <= M`` is a bool, which CP-SAT states as a ``bool_or``, and `fit_linear` reading its
        ``linear`` field would turn it into an empty linear row (always false: "infeasible" on chains
        whose values all have size 0). Such a row is checked here: when it fails no schedule of the class
        fits (no away term can lower it), `infeasible` names it."""
        if isinstance(expr, int):
            if expr > self.M:
                self.infeasible = self.infeasible or f"{name}: {expr} > {self.M} whatever travels"
                self.cp.add_bool_or([])  # the CP-SAT model agrees (its users need not read `infeasible`)
            return
        self.memory_rows.append(self.cp.add(expr <= self.M))

    def _away(self, deadline: Deadline) -> None:
        cp, pm, L, P = self.cp, self.pm, self.L, len(self.slots)
        dc = self.dchain
        o_fa, o_fn, o_b = [int(v) for v in dc.o_fa], [int(v) for v in dc.o_fn], [int(v) for v in dc.o_b]
        self.w: dict[tuple[Value, int], Any] = {}
        # the w of slot p's two pieces 2p, 2p+1, in creation order: the idle-slot rows below read them per slot
        # (a scan of all of w per idle slot was quadratic: minutes for a 52-stage chain)
        by_slot: list[list[tuple[Value, Any]]] = [[] for _ in range(P)]
        reads: dict[tuple[Value, int], Any] = {}  # (v, p) -> literal: slot p reads v
        makes: dict[tuple[Value, int], Any] = {}  # (v, p) -> literal: slot p produces v

        def as_bool(expr: Any, name: str) -> Any:
            if isinstance(expr, int):
                return expr
            b = cp.new_bool_var(name)
            cp.add(b == expr)
            return b

        def both(a: Any, b: Any, name: str) -> Any:
            if isinstance(a, int) and isinstance(b, int):
                return a * b
            if isinstance(a, int):
                return b if a else 0
            if isinstance(b, int):
                return a if b else 0
            u = cp.new_bool_var(name)
            cp.add_bool_and([a, b]).only_enforce_if(u)
            cp.add_bool_or([a.negated(), b.negated()]).only_enforce_if(u.negated())
            return u

        idle: list[tuple[int, Any]] = []  # (slot, its run literal) for forward slots that may stay idle
        for p, sl in enumerate(self.slots):
            if p % 16 == 0:
                deadline.check()
            k, j = sl.k, sl.j
            res = self.resident(sl)
            mem = 0
            if j is not None:
                run = as_bool(self.R[p], f"R{p}")
                ain = as_bool(self.lin(pm.a_in(k, j)), f"ain{p}") if j >= 1 else 1
                if j == 0:
                    reads[(("a", 0), p)] = run
                else:
                    reads[(("a", j), p)] = both(run, ain, f"ra{p}")
                    reads[(("abar", j), p)] = both(run, 1 - ain if isinstance(ain, int) else ain.negated(),
                                                   f"rt{p}")
                fa = pm.get("FA", k, j)
                if fa is not None:
                    makes[(("abar", j + 1), p)] = as_bool(self.lin(fa), f"mk_t{p}")
                fc = Lin().add(pm.get("FC", k, j)).add(pm.get("FN", k, j))
                if fc.terms:
                    makes[(("a", j + 1), p)] = as_bool(self.lin(fc), f"mk_a{p}")
                mem = self.lin(Lin().add(fa, int(dc.xbar[j + 1]) + o_fa[j])  # per-mode overheads
                               .add(pm.get("FC", k, j), int(dc.x[j + 1]) + o_fn[j])
                               .add(pm.get("FN", k, j), int(dc.x[j + 1]) + o_fn[j]))
            elif k == L:
                sa = as_bool(self.lin(res.get(("a", L), 0)), f"ainL{p}") if ("a", L) in res else 0
                reads[(("a", L), p)] = sa
                reads[(("abar", L), p)] = 1 - sa if isinstance(sa, int) else sa.negated()
                mem = int(dc.x[L]) + o_b[L]
            else:
                ain = as_bool(self.lin(res[("a", k)]), f"ainB{p}") if k >= 1 else 1
                reads[(("a", k), p)] = ain
                if k >= 1:
                    reads[(("abar", k), p)] = 1 - ain if isinstance(ain, int) else ain.negated()
                reads[(("abar", k + 1), p)] = 1
                mem = int(dc.x[k]) + o_b[k]  # delta_k made (delta_{k+1}, read, is in the state below)
            # the state before slot p: resident values and the live gradient delta_{k+1}
            gap = int(dc.x[k + 1]) if k < L else 0
            mem = mem + gap
            for v, e in res.items():
                sz = self.size(v)
                mem = mem + sz * self.lin(e)
                gap = gap + sz * self.lin(e)
                r = reads.get((v, p), 0)
                if sz <= 0 or (isinstance(r, int) and r == 1):
                    continue
                # piece 2p: the idle time before slot p (from the end of slot p-1); piece 2p+1: slot p
                for q in ((2 * p, 2 * p + 1) if p else (1,)):
                    wv = cp.new_bool_var(f"w_{v[0]}{v[1]}_{q}")
                    cp.add(wv <= self.lin(e))
                    if not isinstance(r, int):
                        cp.add_implication(wv, r.negated())
                    self.w[(v, q)] = wv
                    by_slot[p].append((v, wv))
                    if q % 2:
                        mem = mem - sz * wv
                    else:
                        gap = gap - sz * wv
            self._memory_row(mem, f"memory at slot {p}")
            if p:
                self._memory_row(gap, f"memory before slot {p}")
            if j is not None and not isinstance(run, int) and p:
                idle.append((p, run))
        # canonical idle slots: an idle slot starts when the slot before it ends, and its two
        # (zero-length) pieces take the away state of the piece after them
        for n, (p, run) in enumerate(idle):
            if n % 16 == 0:
                deadline.check()
            cp.add(self.s[p] == self.e[p - 1]).only_enforce_if(run.negated())
            for v, wv in by_slot[p]:
                after = self.w.get((v, 2 * p + 2))
                if after is None:
                    cp.add(wv == 0).only_enforce_if(run.negated())
                else:
                    cp.add(wv == after).only_enforce_if(run.negated())

        # runs of away slots -> Off / Pre intervals per (value, phase), with their timing
        T = self.T
        stream: list[Any] = []
        self.offs: dict[tuple[Value, int], tuple[Any, Any]] = {}  # (v, phase) -> (present, start)
        self.pres: dict[tuple[Value, int], tuple[Any, Any]] = {}
        self.paid: dict[tuple[Value, int], Any] = {}  # (v, phase) -> the Off moves bytes (no host copy yet)
        Q = 2 * P
        phase_pieces: dict[int, range] = {}  # phase k -> its pieces (its slots are consecutive)
        for sl in self.slots:
            first = phase_pieces.get(sl.k, range(2 * sl.n, 2 * sl.n)).start
            phase_pieces[sl.k] = range(first, 2 * sl.n + 2)
        for v in self.values():
            deadline.check()
            ws = [self.w.get((v, q)) for q in range(Q)]
            if not any(w is not None for w in ws):
                continue
            # LU[p]: last use of v up to slot p (start of a reader, end of its creator, end of a Pre)
            # NU[p]: next reader start from slot p on
            LU = [cp.new_int_var(0, self.horizon, "") for _ in range(P)]
            NU = [cp.new_int_var(0, self.horizon, "") for _ in range(P)]
            for p in range(P):
                if p:
                    cp.add(LU[p] >= LU[p - 1])
                if p + 1 < P:
                    cp.add(NU[p] <= NU[p + 1])
                r = reads.get((v, p), 0)
                if not (isinstance(r, int) and r == 0):
                    lits = [] if isinstance(r, int) else [r]
                    cp.add(LU[p] >= self.s[p]).only_enforce_if(lits)
                    cp.add(NU[p] <= self.s[p]).only_enforce_if(lits)
                mk = makes.get((v, p))
                if mk is not None and not (isinstance(mk, int) and mk == 0):
                    cp.add(LU[p] >= self.e[p]).only_enforce_if([] if isinstance(mk, int) else [mk])
            earlier: list[Any] = []  # Offs of v in earlier phases: a later Off is free (the host has a copy)
            for k in range(L, -1, -1):
                pieces = [q for q in phase_pieces.get(k, ()) if ws[q] is not None]
                if not pieces:
                    continue
                starts, ends = [], []
                so = cp.new_int_var(0, self.horizon, f"so_{v[0]}{v[1]}_{k}")
                sp = cp.new_int_var(0, self.horizon, f"sp_{v[0]}{v[1]}_{k}")
                has_off, has_pre = cp.new_bool_var(""), cp.new_bool_var("")
                paid = cp.new_bool_var("")
                if earlier:
                    held = cp.new_bool_var("")
                    cp.add_max_equality(held, earlier)
                    cp.add(paid >= has_off - held)
                    cp.add_implication(paid, held.negated())
                else:
                    cp.add(paid == has_off)
                cp.add_implication(paid, has_off)
                off_end = cp.new_int_var(0, self.horizon, "")
                cp.add(off_end == so + T[v] * paid)
                for q in pieces:
                    wq = ws[q]
                    assert wq is not None
                    p = q // 2
                    prev = ws[q - 1] if q else None
                    nxt = ws[q + 1] if q + 1 < Q else None
                    bs = run_edge(cp, wq, prev)  # a run of away pieces starts at q: its Off
                    be = run_edge(cp, wq, nxt)  # a run ends at q: its Pre
                    gap_piece = q % 2 == 0
                    cp.add(off_end <= (self.e[p - 1] if gap_piece else self.s[p])).only_enforce_if(bs)
                    if p:
                        cp.add(so >= LU[p - 1]).only_enforce_if(bs)
                    cp.add(sp >= (self.s[p] if gap_piece else self.e[p])).only_enforce_if(be)
                    nu = NU[p] if gap_piece else (NU[p + 1] if p + 1 < P else None)
                    if nu is not None:
                        cp.add(sp + T[v] <= nu).only_enforce_if(be)
                    cp.add(LU[p] >= sp + T[v]).only_enforce_if(be)
                    starts.append(bs)
                    ends.append(be)
                cp.add(sum(starts) == has_off)
                cp.add(sum(ends) == has_pre)
                cp.add(so == 0).only_enforce_if(has_off.negated())
                cp.add(sp == 0).only_enforce_if(has_pre.negated())
                if T[v] > 0:
                    # a free Off is a zero-length interval: NoOverlap keeps it out of another transfer
                    # (the simulator would hold it back until the stream is idle)
                    stream.append(cp.new_optional_interval_var(so, T[v] * paid, off_end, has_off, ""))
                    stream.append(cp.new_optional_fixed_size_interval_var(sp, T[v], has_pre, ""))
                earlier.append(has_off)
                self.offs[(v, k)] = (has_off, so)
                self.paid[(v, k)] = paid
                self.pres[(v, k)] = (has_pre, sp)
        if stream:
            cp.add_no_overlap(stream)

    # ------------------------------------------------------------------ warm start and answer
    def schedule(self, solver: cp_model.CpSolver) -> OffloadSchedule:
        """The solution as an offloading schedule in start-time order, every op pinned."""
        timed: list[tuple[int, int, int, Op | Transfer]] = []
        starting: dict[int, list[Op]] = {}
        for p, sl in enumerate(self.slots):
            t = solver.value(self.s[p])
            if sl.j is None:
                timed.append((t, 0, p, Loss(self.L) if sl.k == self.L else Bwd(sl.k)))
                starting.setdefault(t, []).append(Loss(self.L) if sl.k == self.L else Bwd(sl.k))
                continue
            for kind, name in (("FA", F_ALL), ("FC", F_CK), ("FN", F_N)):
                i = self.pm.index.get((kind, sl.k, sl.j))
                if i is not None and solver.value(self.x[i]):
                    timed.append((t, 0, p, Op(name, sl.j)))
                    starting.setdefault(t, []).append(Op(name, sl.j))
        for n, ((v, k), (present, so)) in enumerate(self.offs.items()):
            if solver.value(present):  # a free Off first among transfers starting at its time
                t = solver.value(so)
                if solver.value(self.paid[(v, k)]):
                    timed.append((t, 2, n, Off(*v)))
                else:  # before the compute op of its tick, unless that op reads v (`free_off_first`)
                    timed.append((t, -1 if free_off_first(v, starting.get(t, []), self.L) else 1, n, Off(*v)))
        for n, ((v, _k), (present, sp)) in enumerate(self.pres.items()):
            if solver.value(present):
                timed.append((solver.value(sp), 3, n, Pre(*v)))
        timed.sort(key=lambda item: item[:3])
        return OffloadSchedule([item[3] for item in timed], self.L, [item[0] / self.scale for item in timed])


def scope_of(scale: float, slots: int) -> str:
    """The class the model is exact for (`SolveResult.scope`)."""
    return ("offload-exact: phase-form compute sequences (at most one forward per stage between consecutive "
            "backward ops: stage j computed at most L-j+1 times), values travel for whole compute slots (released "
            "before the first slot they are away in, prefetched after the last), at most one Off and one Pre of a "
            "value per phase, every offloaded value fetched back (an Off never followed by a Pre acts as a delete, "
            "which the model has no op for), an Off charged its transfer time unless the host already holds a copy "
            f"of its value (a repeated Off is free), times in ticks of 1/{scale:g}, "
            + scope_text(slots))


def check_options(inst: OffloadInstance, *, scale: Any = None, parameters: Any = "", **_: Any) -> None:
    """The options `scale` (`offload.cpsat.check_scale`) and `parameters` (`check_parameters`),
    before the warm start: bad values are an `InputError` at once."""
    check_scale(inst, scale=scale)
    check_parameters(parameters)


@refuses("offload-exact", "memory_gb", why=CPSAT_MEMORY)
@check_first(check_options)
@exact_solver("offload", "offload-exact", FAST, time_limit=60.0, workers=1, slots=DEFAULT_SLOTS,
              least=lambda inst: inst.chain.total_time(), reseed=any_size_seed)
def solve_offload_exact(inst: OffloadInstance, budget: int, *, options: ExactOptions, deadline: Deadline,
                        seed: SolveResult | None = None, scale: float | None = None, parameters: str = "",
                        **_: Any) -> SolveResult:
    """The model of the module docstring (default 60 s, 1 worker, sizes in 100 slots of the
    budget; ``slots=0``: exact sizes). Warm start: the best fast solver's schedule (pofo's
    first) as CP-SAT hints. `scale`: ticks per time unit (default: exact when durations allow;
    given, as `offload.cpsat.check_scale` accepts); `parameters`: CP-SAT parameters, "name:value"
    pairs (`exact.cpsat_runner.parse_parameters`).
    The exact layer's ``reseed`` (`exact_free_hint.any_size_seed`) runs pofo at exact sizes once,
    within the time limit: when it is faster than the fast solvers at the slots (or no fast solver has
    a schedule), the model runs with exact sizes; when sizes rounded up to slots make the budget
    infeasible, it is solved again with exact sizes in the time left (`exact_free_retry`)."""
    from .exact_free_retry import with_exact_sizes

    return with_exact_sizes(_solve, inst, budget, options, deadline, seed=seed, scale=scale, parameters=parameters)


def _solve(inst: OffloadInstance, budget: int, *, options: ExactOptions, deadline: Deadline,
           seed: SolveResult | None, scale: float | None, parameters: str) -> SolveResult:
    chain = inst.chain
    L = chain.length
    budget = int(budget)
    times = [float(t) for t in (*chain.u_fa[:L], *chain.u_fn[:L], *chain.u_b[: L + 1])] + [
        inst.transfer_time(int(b)) for b in (*chain.x[: L + 1], *chain.xbar[1: L + 1])]
    if scale is None:
        scale = fit_scale(inst, tick_scale(times)[0])
    whole = all(ticks_exact(t, scale, duration_ticks(t, scale)) for t in times)
    slots = effective_slots(budget, options.slots)
    dchain, M = discretise(chain, budget, options.slots)
    scope = scope_of(scale, slots)
    common: dict[str, Any] = {"problem": "offload", "solver": "offload-exact", "budget": budget, "scope": scope}
    from .exact_free_hint import CPSAT_EXTRA, complete_hint, hint, seed_answer

    t0 = deadline.elapsed()
    model = FreeOrderModel(inst, dchain, M, scale, deadline, link_rows=LINK_ROWS)  # rows: exact_free_cuts
    while (need := max_row_sum(model.cp)) > ROW_LIMIT:
        # a time row in ticks past ROW_LIMIT (a `scale` given as an option; CP-SAT 9.15's presolve overflows
        # past 2^31): a coarser tick, durations rounded up (not whole: `feasible`), the scope names the tick
        scale /= -(-need // ROW_LIMIT)
        whole = all(ticks_exact(t, scale, duration_ticks(t, scale)) for t in times)
        common["scope"] = scope = scope_of(scale, slots)
        model = FreeOrderModel(inst, dchain, M, scale, deadline, link_rows=LINK_ROWS)
    if model.infeasible:
        return SolveResult(status=INFEASIBLE, message=f"no schedule fits: {model.infeasible}", **common)
    hinted = hint(model, seed) if options.warm_start else False
    build_s = deadline.elapsed() - t0
    details: dict[str, Any] = {"slots_in_phases": len(model.slots), "away_vars": len(model.w),
                               "build_s": round(build_s, 3), "scale": scale, "hinted": hinted,
                               "workers": options.workers, "link_rows": len(model.link_rows)}
    stage1 = None
    # every schedule runs each F_all(i) and B(i) at least once: sum u_fa + sum u_b (ticks) bounds the makespan
    floor_ticks = sum(duration_ticks(float(t), scale) for t in (*chain.u_fa[:L], *chain.u_b[: L + 1]))
    if hinted:
        details["warm_start_makespan"], stage1 = complete_hint(model, deadline, options, scale, floor_ticks)
        details.update(model.warm_notes)
    if seed is not None:
        details["seed_makespan_exact_sizes"] = seed.objective
    warm = details.get("warm_start_makespan")
    if stage1 is not None and warm is not None and whole and round(warm * scale) <= floor_ticks:
        # the warm start runs every op once with no wait (the every-op-once bound): nothing is faster
        run = BackendRun(OPTIMAL, None, warm, warm, solver=stage1, backend_status="not run: warm start = the bound")
    else:
        run = run_cpsat(model.cp, deadline, options, scale=scale, parameters=parameters, extra=CPSAT_EXTRA,
                        watched=True)
    details["backend_status"] = run.backend_status
    if not model.rows_exact:
        common["scope"] = scope = scope + ", memory rows rounded up for CP-SAT (sizes past 2^30 in a row)"
    settled = model.rows_exact or run.status not in (OPTIMAL, INFEASIBLE) or run.solver is stage1
    relaxed = None if settled else _relaxed_run(inst, dchain, M, scale, deadline, options, parameters)
    if run.status == INFEASIBLE and relaxed is not None and relaxed.status == INFEASIBLE:
        run = relaxed  # no plan fits even the memory rows rounded down: none fits the budget
    elif run.status == INFEASIBLE and not model.rows_exact:  # the rows rounded up prove nothing
        return seed_answer(seed, details, common, run) or SolveResult(
            status=TIMEOUT, details=details, log=run.log, **common,
            message="no schedule with the memory rows rounded up for CP-SAT (exact sizes may fit)")
    if run.status == INFEASIBLE:
        return SolveResult(status=INFEASIBLE, details=details, log=run.log,
                           message="no schedule of this class fits the budget", **common)
    solver, model_makespan = run.solver, run.objective
    if run.status not in (OPTIMAL, FEASIBLE) or solver is None:
        if stage1 is None:
            return seed_answer(seed, details, common, run) or SolveResult(
                status=TIMEOUT, details=details, log=run.log, message="no schedule within the time limit", **common)
        solver, model_makespan = stage1, details["warm_start_makespan"]  # the warm start's solution
        details["solution_stage"] = 1
    schedule = model.schedule(solver)
    sim = simulate(inst, schedule, budget)
    if not sim.valid:  # a modelling bug: the referee's verdict wins, the answer falls back on the seed
        return _invalid_answer(sim.violation, seed, details, common, run)
    if seed is not None and seed.objective is not None and seed.objective < sim.makespan - 1e-9 * sim.makespan:
        details["model_makespan"] = model_makespan
        answer = seed_answer(seed, details, common, run)
        assert answer is not None
        return answer
    details.update({"model_makespan": model_makespan, "transfers": len(schedule.transfers()),
                    "host_peak": sim.host_peak, "model_bound": run.bound if whole and model.rows_exact else None})
    # relative comparisons (`same_or_less`, no absolute floor): with times of 1e-12 units a floor of 1e-9 would
    # pass any disagreement and any relaxed bound as a proof
    agrees = model_makespan is not None and same_or_less(sim.makespan, model_makespan) \
        and same_or_less(model_makespan, sim.makespan)
    # rounded memory rows: a proof of the restricted model is none (unless the warm start meets the bound)
    proof = model.rows_exact or run.solver is stage1 or (
        relaxed is not None and relaxed.bound is not None and model_makespan is not None
        and same_or_less(model_makespan, relaxed.bound))
    if not model.rows_exact and relaxed is not None and relaxed.status in (OPTIMAL, FEASIBLE) and whole:
        details["model_bound"] = relaxed.bound  # the relaxation's bound holds for the exact rows
    status = OPTIMAL if run.status == OPTIMAL and whole and agrees and proof else FEASIBLE
    # the bound is the model's: it bounds the schedules of its class (the scope), as the chain's
    # phase model does; the referee drops it when a fast solver's schedule beats it
    return SolveResult(status=status, objective=sim.makespan, peak_memory=sim.peak_memory,
                       lower_bound=details["model_bound"],
                       schedule=schedule, details=details, log=run.log, **common)



def _relaxed_run(inst: OffloadInstance, dchain: Any, M: int, scale: float, deadline: Deadline,
                 options: ExactOptions, parameters: str) -> BackendRun:
    """The model with its memory rows rounded *down* (`FreeOrderModel`, ``round_up=False``), no hint:
    its ``infeasible`` and its bound hold for the exact rows (the proof a rounded-up model lacks)."""
    from .exact_free_hint import CPSAT_EXTRA

    relaxed = FreeOrderModel(inst, dchain, M, scale, deadline, link_rows=LINK_ROWS, round_up=False)
    return run_cpsat(relaxed.cp, deadline, options, scale=scale, parameters=parameters, extra=CPSAT_EXTRA)


def _invalid_answer(violation: Any, seed: SolveResult | None, details: dict[str, Any], common: dict[str, Any],
                    run: Any) -> SolveResult:
    """The answer when the simulator rejects the model's schedule (a modelling bug, never expected): the seed's
    schedule (``feasible``), else no schedule (``timeout``: nothing proven); never an exception. The message and
    ``details.model_invalid`` name the violation."""
    from .exact_free_hint import seed_answer

    details["model_invalid"] = str(violation)
    note = f"the model's schedule fails the simulator ({violation})"
    answer = seed_answer(seed, details, common, run)
    if answer is not None:
        answer.message = f"{note}; returned {details['solution_from']}'s schedule"
        return answer
    return SolveResult(status=TIMEOUT, details=details, log=run.log,
                       message=f"{note}; no fast solver's schedule to return", **common)
