/*
 * Tail evidence for ledger_bench (issue 11), compiled only into
 * //bench:ledger_evidence_bench: ledger_bench.c built with BENCH_EVIDENCE and
 * linked against //ledger:ledger_hooks, so that the real benchmark stays
 * hook-free. Nothing here asserts anything; it counts and attributes.
 *
 * What it counts, per row (timed phase only):
 *   - page faults and context switches of the process (getrusage);
 *   - per thread (/proc/self/task/<tid>/schedstat, status, stat): the
 *     workers' time on a CPU and runnable but waiting, their timeslices and
 *     (in)voluntary switches, so their own ns per op against the wall's; each
 *     other thread's CPU time (liburcu's call_rcu thread: grace periods and
 *     the segment callbacks; a +reader row's reader may have left before the
 *     phase's end is read, and then is not counted) and the CPU it last ran on;
 *     and per worker CPU
 *     (/proc/stat) the steal, irq and softirq time;
 *   - call_rcu calls (retired segments) and grace periods per op, and
 *     callbacks per grace period;
 *   - interrupts per kind (/proc/interrupts CAL, TLB, RES, LOC, IWI) summed
 *     over the CPUs the workers run on, before and after;
 *   - every syscall() liburcu makes (membarrier, futex), by thread kind
 *     (worker or not), each stamped with rdtsc at entry and exit; liburcu
 *     calls syscall(2) for both, and this binary defines syscall() itself, so
 *     the calls of liburcu (shared or static) come here first;
 *   - the ledger's segment extensions (hook LDG__HOOK_SEGMENT_ALLOCATED),
 *     each told fresh (an aligned_alloc since the enqueue began: the link
 *     wraps aligned_alloc), popped from the pool (hook LDG__HOOK_POOL_POP)
 *     or the spare a release prepared (neither), and the head advances
 *     (segment retirements, each a call_rcu);
 * and, for every sampled enqueue (one in --sample-every), a record: its
 * ticks, the ticks until its seq was reserved (hook ENQUEUE_RESERVED), the
 * events of its own thread inside it (extension, fresh or pooled; head
 * advance; a futex or membarrier it made), its thread's page faults and
 * context switches (getrusage(RUSAGE_THREAD) just outside the timed window),
 * and, found afterwards, whether any thread's membarrier overlapped it.
 * The row's report attributes the samples at or above p99.9 (and p99) to
 * those causes.
 */
#ifndef STREAMLEDGER_BENCH_EVIDENCE_H
#define STREAMLEDGER_BENCH_EVIDENCE_H

#include <stdbool.h>
#include <stdint.h>

/* Once, before any row: installs the hook, calibrates membarriers per
 * grace period (prints it). ns_per_tick converts the samples. */
void ev_init(double ns_per_tick);

/* On a worker thread, around one sampled enqueue: begin before t0, end
 * after t1 (its getrusage calls stay outside [t0, t1]). */
void ev_sample_begin(void);
void ev_sample_end(bool timed, uint64_t t0, uint64_t t1);

/* On a worker thread, before every enqueue (sampled or not): where its
 * extension, if any, gets its segment is told from what happens after. */
void ev_op_begin(void);

/* Marks the calling thread as a worker of the row (for the syscall counts). */
void ev_worker_start(void);

/* On a worker thread, when its phase's loop has ended (before the closing
 * barrier): with timed, it reads its own CPU time and switches for the row. */
void ev_worker_phase_end(bool timed);

/* Main thread: the row's ledger (its pool's pops by age are reported);
 * NULL between rows. */
struct ldg_ledger;
void ev_set_ledger(struct ldg_ledger *l);

/* Main thread: the timed phase begins (workers released) / has ended. */
void ev_phase_begin(void);
void ev_phase_end(void);

/* Main thread, after the row: prints the evidence block for it and resets.
 * cpus: the CPUs the workers were pinned to (n of them). */
void ev_row_report(const char *label, uint64_t enqueues, double seconds,
                   const int *cpus, int n);

#endif /* STREAMLEDGER_BENCH_EVIDENCE_H */
