/*
 * The progress engine of the CUDA layer: releases work as the GPU completes
 * it, without any request thread synchronising (issue 9). cuda/engine.c
 * opens with the argument; this header is the contract.
 *
 * WHAT IT DOES
 *   Once enabled on a context, every stream gets a ring of completion
 *   markers: those that exist already (their work issued before is covered
 *   by the engine's first tail marker) and those created afterwards. As
 *   work is issued on the stream (any of the asynchronous calls of
 *   sl_cuda.h), the layer records markers — pooled driver events,
 *   cuEventRecord — only when work was enqueued since the last one: the
 *   engine thread, as its PACING says (the default, PLACEMENT), or the
 *   issuing call after at most `marker_every_ops` operations or
 *   `marker_every_us` microseconds, whichever comes first. A marker
 *   carries the ledger mark read just before its record (mark, then
 *   record: SPEC.md section 2). The engine checks the oldest pending
 *   markers of each stream with cuEventQuery; a completed one releases its
 *   stream up to its mark (ldg_release: in order, and transitively through
 *   waits). Work not yet
 *   covered by a marker when issuing stops gets a "tail" marker from the
 *   engine itself. Why events: bench/RESULTS.md, "Completion markers".
 *
 * TWO WAYS TO DRIVE IT (both may be used at once)
 *   - engine threads (config.thread), one per device (DEVICES): each
 *     waits as WAITING says, parks (no CPU) when nothing was pending or
 *     uncovered on its device for a while, and is then woken by the next
 *     issue on that device; stopped with the context
 *     (slc_context_destroy);
 *   - slc_engine_poll, which any thread may call from its own loop (as
 *     PyTorch's allocator processes its events on malloc): non-blocking.
 *
 * DEVICES (issue 13; bench/RESULTS.md, "Several GPUs")
 *   The engine is one engine per device of the context: each has its own
 *   list of the streams of its device, its own consumer flag, its own
 *   wait and pacing state (the predicted completion of its markers among
 *   them) and its own thread. A stream joins its device's engine. So on a
 *   node of several GPUs:
 *   - a thread switches contexts once (its device's), not per stream (a
 *     single thread polling every device's streams called cuCtxSetCurrent
 *     per stream whose device differed from the previous one's);
 *   - a poll of one device's streams never makes another device's
 *     slc_engine_poll_stream return empty-handed (one consumer flag for
 *     all made it "busy");
 *   - a keep that blocks on one device's thread holds up no release of
 *     another device, and a long kernel on one device does not delay the
 *     keeps of another (whose markers were predicted as slow as its).
 *   config.one_thread keeps one thread for all (it polls each device's
 *   engine in turn: one context switch per device per poll, and a keep
 *   blocking it holds up every device, as before): for a process that
 *   drives many GPUs from few cores, where one thread's wake-ups serve
 *   every device at once; each device's thread otherwise wakes up to once
 *   per poll_max_us while its device streams (~5 us of CPU each on the
 *   H200 host, WAITING). A thread whose device has no stream stays parked
 *   (no CPU).
 *
 * WAITING (the engine thread's policy, config.wait; bench/RESULTS.md,
 * issue 9, has the measurements)
 *   Each wake-up costs the thread ~5 us of CPU on the H200 host whatever it
 *   finds, so the policy is about how many there are.
 *   - SLC_ENGINE_WAIT_ADAPTIVE (the default): a stream whose issuer waits
 *     gets a wake-up when its oldest marker should complete (predicted
 *     from earlier markers), then after a quarter of its age, between
 *     poll_us and poll_max_us; a streaming one (PACING) one wake-up per
 *     poll_max_us. With nothing pending the thread lingers for linger_us,
 *     napping up to poll_max_us, before parking, so that an issue right
 *     after a release needs no futex wake-up (a syscall, ~1-4 us, on the
 *     issuing thread). Parking costs the thread one membarrier(2) call
 *     (MEMBARRIER_CMD_PRIVATE_EXPEDITED, where the ledger uses it: an
 *     interrupt to each CPU running a thread of the process), so that the
 *     issuers' wake-up check needs no fence (engine.c, WAKING THE ENGINE
 *     THREAD); it parks only after linger_us idle.
 *   - SLC_ENGINE_WAIT_FIXED (the first version, kept for comparison): a
 *     poll every poll_us while anything is pending or uncovered, a tail
 *     marker as soon as none is pending, parks at once when idle; no
 *     pacing.
 *   slc_engine_poll is the same under both: one non-blocking pass, a tail
 *   marker as soon as none is pending, no pacing.
 *
 * PACING (the adaptive thread's: streaming or waiting, per stream)
 *   A stream is streaming when its issuer does not wait for its keeps: it
 *   issued past a marker still pending or just completed, or it issues
 *   fast — a sequence number (operation, wait) at least every 12.5 us on
 *   average (80 k/s, whatever poll_max_us), over 2 consecutive windows of
 *   poll_max_us each. The second test is the
 *   one that matters when the GPU finishes each operation before the next
 *   is issued (100 k empty kernels/s on an H200): then every marker
 *   completes with nothing past it, and only the rate tells the issuer
 *   from one that waits for each keep. A streaming stream is batched: one
 *   wake-up per poll_max_us releases what the previous one covered and
 *   (PLACE_ENGINE) places one marker over all work issued since, so
 *   <= 1 wake-up and 1 marker per poll_max_us of work. It stops batching
 *   once a window of poll_max_us saw fewer than 4; its keeps are then
 *   prompt again.
 *   THE BOUND: a batched operation's keep runs at most
 *   2 x poll_max_us + poll_us after the operation completed (plus the
 *   thread's own scheduling delay): 405 us at the defaults. A waiting
 *   issuer is never batched unless it issues that fast (a request of many
 *   operations, or operations that complete at once); then it is found out
 *   in the first window of its batching (it issued < 4 while waiting), one
 *   keep is delayed by at most the bound, and a batching that ended in its
 *   first window doubles the windows needed to begin the next (up to 1024;
 *   one that went on resets them). The price of the margin: a stream
 *   issuing slower than that (below 80 k ops/s) whose
 *   operations each complete before the next issue still costs about one
 *   wake-up per operation, as before pacing. Counters: slc_engine_stats's
 *   batch_enters and batch_exits, thread_sleeps + thread_parks (the
 *   wake-ups), polls, markers_placed.
 *
 * PLACEMENT (config.placement; bench/RESULTS.md, "Issue 9, third round"
 * and "fourth round")
 *   - SLC_ENGINE_PLACE_ENGINE (the default, with a thread; without one, as
 *     ISSUER): an issuing call only loads two pointers and, if the thread
 *     is parked, wakes it (a lingering thread sees the work at its next
 *     nap); the thread records every marker, one in flight per stream — at
 *     once for a waiting issuer, once per poll_max_us for a streaming one.
 *     The cost on the issuing thread is a load of the thread's parked
 *     flag after a compiler barrier: no fence, no locked instruction (the
 *     parking thread pays a membarrier instead; without membarrier, a
 *     seq_cst fence, none after slc_stream_record_deferred, whose
 *     enqueue's seq_cst RMW orders it: engine.c); the price: a
 *     waiting issuer's marker is recorded at the thread's next wake-up
 *     (poll_us after its last release, longer as it lingers), usually
 *     while its operation still runs.
 *   - SLC_ENGINE_PLACE_ISSUER: the issuing call records a marker every N
 *     ops / T us (cuEventRecord on its thread, 0.3-0.6 us on the H200);
 *     the thread places tail markers and paces its wake-ups alike.
 *
 * WHERE AND IN WHICH ORDER KEEPS RUN
 *   On the engine thread of the stream's device, or the thread that called
 *   slc_engine_poll (and, as
 *   with any release, an issuing call whose enqueue a marker's release
 *   overtook runs that keep itself: SLC_CAUSE_ENQUEUE, sl_cuda.h; more often
 *   with SLC_ENGINE_PLACE_ENGINE, whose thread reads marks while issuers
 *   enqueue), never on
 *   a driver callback thread and never while the engine holds anything: the
 *   engine takes completed markers under its consumer flag (a try-flag
 *   nobody waits on, except stream creation and the last unref), drops it,
 *   and only then releases. The engine's releases of one stream never
 *   overlap (a per-stream hand-over: a thread that finds the stream being
 *   released leaves its mark to the releasing thread), so its keeps of a
 *   stream run in sequence order, and a keep that blocks holds up only its
 *   own stream's later keeps (the other streams of its device go on by
 *   polls, those of other devices by their threads too; with one_thread,
 *   every other stream by polls only). A synchronisation on another thread may release the same stream
 *   at the same time (the ledger splits the entries): a serving loop should
 *   recycle a buffer from the keep of the operation that used it last, not
 *   from a later operation's keep. A keep may call any slc_ function
 *   (slc_engine_poll included), except slc_context_destroy.
 *
 * FAILURES
 *   - A marker that cannot be recorded (cuEventRecord or cuEventCreate
 *     fails, or the stream's ring is full because the engine is behind) is
 *     skipped: its work is covered by the next marker or by a tail marker,
 *     i.e. released later, never earlier. A cuEventRecord failing with a
 *     sticky-class error (CUDA_ERROR_LAUNCH_FAILED, _ILLEGAL_ADDRESS,
 *     _ILLEGAL_INSTRUCTION, _MISALIGNED_ADDRESS, _INVALID_ADDRESS_SPACE,
 *     _INVALID_PC, _HARDWARE_STACK_ERROR, _ASSERT, _LAUNCH_TIMEOUT,
 *     _ECC_UNCORRECTABLE: every later record would fail too, so no marker
 *     would ever be queried) makes the stream's engine error sticky at
 *     once, as failed queries do below; the next poll reports it.
 *   - The engine's driver failures never touch the calling thread's error
 *     record (slc_last_error): an issuing call whose marker failed, and a
 *     poll whose query failed, succeed; the stats count the failure.
 *   - A cuEventQuery that fails releases nothing. After
 *     SLC_ENGINE_QUERY_RETRIES consecutive failures on one stream, the
 *     stream's engine error becomes sticky: the engine stops querying it,
 *     calls config.on_error once (on the engine or polling thread, no lock
 *     held) and slc_stream_engine_error reports it. Its keeps stay held (no
 *     completion can be proven) until a synchronisation succeeds: of the
 *     stream, a settle or device sync covering it, slc_stream_destroy
 *     (which refuses while its sync fails), or — once the last reference
 *     went and that destroy's sync failed, so the stream waits in the
 *     context's limbo list, no longer driven by the engine —
 *     slc_context_destroy, which synchronises it first and returns the
 *     error, releasing nothing, while that fails (see sl_cuda.h,
 *     slc_stream_unref).
 *   - How keeps learn why they run: every keep runs with proof that its
 *     work completed (a sync, a query, an event, a marker, a destroy or
 *     context destroy after a successful sync); nothing is dropped without
 *     proof, so slc_keep_status(), called inside a keep, says LDG_OK.
 *
 * OBSERVABILITY
 *   slc_engine_stats_get (context-wide counters: the sum over devices),
 *   slc_engine_device_stats_get (one device's) and slc_stream_progress_get
 *   (one stream: marks, pending count, markers pending, age of the oldest,
 *   sticky error) read atomics only: any thread, any time, no enqueuer
 *   stopped. "Who holds buffer b": ldg_vector_holders(slc_context_ledger(c),
 *   slc_buffer_id(b), ...) lists every pending operation naming it, on every
 *   stream, blocking ones included, with stream id and sequence number.
 *   Keeps run are counted by cause (slc_keep_cause: engine thread, poll,
 *   sync, event, destroy, overtaken enqueue), exactly: the ledger counts,
 *   per thread, the operations each call took (ldg_thread_ops_released).
 *
 * THREADING (who may call what)
 *   function                  may block       lock taken        runs keeps
 *   ------------------------  --------------  ----------------  ----------
 *   issuing calls (markers)   no              none (try-flags)  no
 *   slc_engine_enable         yes (c)         streams mutex,    no
 *                                             consumer flags
 *   slc_engine_poll,          no              consumer try-     yes (a)
 *     slc_engine_poll_stream                  flags
 *   slc_engine_stats,         no              none              no
 *     slc_engine_device_stats,
 *     slc_stream_progress,
 *     slc_stream_engine_error
 *   slc_stream_create         briefly (b)     streams mutex,    no
 *                                             consumer flag
 *   last slc_stream_unref     briefly (b)     streams mutex,    yes
 *                                             consumer flag
 *   (a) after dropping the flag; each device's flag in turn
 *   (slc_engine_poll), never two at once. (b) waits for a running poll's
 *   query phase of the stream's device (never for keeps), and for the
 *   context's streams mutex, which only these three calls take (never a
 *   keep-running or issuing path). (c) starts the threads (one per device,
 *   or one); waits as (b), for each device's flag in turn; the first call
 *   of the process may register membarrier(2), once, as the first stream's
 *   creation does (the threads' park uses it: WAITING).
 */
#ifndef STREAMLEDGER_CUDA_SL_ENGINE_H
#define STREAMLEDGER_CUDA_SL_ENGINE_H

#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda/sl_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Consecutive failed queries of one stream's marker before its engine error
 * becomes sticky. */
#define SLC_ENGINE_QUERY_RETRIES 3

/* How the engine thread waits (see WAITING above). */
typedef enum slc_engine_wait {
  SLC_ENGINE_WAIT_ADAPTIVE = 0,
  SLC_ENGINE_WAIT_FIXED = 1,
} slc_engine_wait;

/* Who records the markers (see PLACEMENT above). */
typedef enum slc_engine_placement {
  SLC_ENGINE_PLACE_ENGINE = 0, /* the default */
  SLC_ENGINE_PLACE_ISSUER = 1,
} slc_engine_placement;

typedef struct slc_engine_config {
  bool thread;                 /* start engine threads: one per device
                                * (one_thread: one for all) */
  unsigned marker_every_ops;   /* N: a marker after N operations (0: 8) */
  unsigned marker_every_us;    /* T: or after T us since the last (0: 20) */
  unsigned poll_us;            /* engine thread's poll period (0: 5) */
  unsigned markers_per_stream; /* ring size, a power of two <= 4096 (0: 64) */
  slc_engine_wait wait;        /* the thread's wait policy (0: adaptive) */
  unsigned poll_max_us;        /* adaptive: longest sleep, and the batch
                                * period of PACING (0: 200) */
  unsigned linger_us;          /* adaptive: awake this long after work
                                * before parking (0: 2000) */
  /* Called once per stream whose engine error became sticky, on the engine
   * or polling thread, no lock held. May be NULL. */
  void (*on_error)(void *arg, uint64_t stream_id, int device, CUresult cu);
  void *on_error_arg;
  slc_engine_placement placement; /* who records markers (0: the engine
                                   * thread, if there is one) */
  bool one_thread; /* with thread: one engine thread polls every device's
                    * engine in turn, instead of one thread per device
                    * (DEVICES says when to) */
} slc_engine_config;

/* Enables the engine on c (cfg NULL: the defaults, with a thread per
 * device). Every stream of c is driven by its device's engine from now on:
 * those created later, and those that exist already (even while other
 * threads issue on them: their next issue sees the ring; work issued
 * before gets a tail marker).
 * LDG_EINVAL: c NULL, markers_per_stream not a power of two or > 4096, wait
 * or placement not one of its enum's values. LDG_EBUSY: already enabled.
 * LDG_ENOMEM: memory, or a thread that could not start (nothing changed:
 * no stream is driven, the threads started are stopped); SLC_EDRIVER is
 * not possible (no driver call). The engine ends with
 * slc_context_destroy. */
int slc_engine_enable(slc_context *c, const slc_engine_config *cfg);

/* Checks every engine-driven stream of c once, without blocking, device
 * by device: releases streams to their completed markers (keeps run here,
 * after that device's flag is dropped), places tail markers for uncovered
 * work, reports sticky errors. *released (may be NULL): how many stream
 * releases it made. A device that another thread is polling is skipped
 * (that one does its work); if every device is, returns with
 * *released = 0. The calling thread's current context is left as one of
 * the devices' (as by any call of the layer). LDG_EINVAL: c NULL or no
 * engine. */
int slc_engine_poll(slc_context *c, size_t *released);

/* slc_engine_poll for s alone: releases s to its completed markers on the
 * calling thread (its keeps run here), places a tail marker for uncovered
 * work. For a thread that wants the keeps of its own streams (a pool
 * returning the blocks it freed to its own cache) without running every
 * stream's. Non-blocking; returns at once with *released = 0 if another
 * thread is polling s's device (a poll of another device does not stop
 * it). LDG_EINVAL: s NULL, or s not engine-driven (see
 * slc_stream_progress's engine_driven). */
int slc_engine_poll_stream(slc_stream *s, size_t *released);

/* Why the layer ran a keep (slc_engine_stats.keeps_by_cause). A keep
 * released transitively (a stream waiting on another) counts under the
 * cause of the call whose release reached it; a keep that a keep's own
 * layer call ran counts under that inner call's cause. */
typedef enum slc_keep_cause {
  SLC_CAUSE_ENGINE = 0,  /* the engine thread, from a completed marker */
  SLC_CAUSE_POLL = 1,    /* slc_engine_poll and slc_engine_poll_stream,
                          * from a completed marker */
  SLC_CAUSE_SYNC = 2,    /* slc_stream_synchronize, slc_stream_query,
                          * slc_device_synchronize, the settles (buffer
                          * frees, slc_copy_dtoh/htod, range settles) */
  SLC_CAUSE_EVENT = 3,   /* slc_event_synchronize/_query, and
                          * slc_stream_wait_event (a release overtaking it) */
  SLC_CAUSE_DESTROY = 4, /* slc_stream_destroy, the last slc_stream_unref */
  SLC_CAUSE_ENQUEUE = 5, /* an issuing call whose entry a concurrent release
                          * overtook (ldg_enqueue runs that keep itself) */
  SLC_CAUSE_COUNT = 6
} slc_keep_cause;

/* Context-wide counters (the sum of every device's engine's; keeps are
 * counted per context); a snapshot callable from any thread at any time
 * without stopping enqueuers (each counter is read atomically; they are not
 * one instant's values). */
typedef struct slc_engine_stats {
  uint64_t polls;            /* engine polls that ran (thread and callers;
                              * one per device with streams polled) */
  uint64_t markers_placed;   /* markers recorded, tail markers included */
  uint64_t tail_markers;     /* of which placed by the engine */
  uint64_t markers_done;     /* markers found complete */
  uint64_t markers_skipped;  /* not placed: ring full or record failed */
  uint64_t record_failures;  /* cuEventRecord / cuEventCreate failures, or
                              * the context could not be made current */
  uint64_t query_failures;   /* cuEventQuery failures, or the context could
                              * not be made current for a poll's queries */
  uint64_t stream_errors;    /* streams whose engine error became sticky */
  uint64_t releases;         /* ldg_release calls made by the engine */
  uint64_t seqs_released;    /* sequence numbers those covered (operations
                              * and waits), each counted once; some may
                              * have been released earlier by a sync */
  uint64_t events_live;      /* marker events the engine holds (an event
                              * whose cuEventDestroy failed twice is given
                              * up to the context's teardown, uncounted) */
  uint64_t markers_pending;  /* markers recorded and not yet found done */
  /* The engine threads' waits (0 without a thread): */
  uint64_t thread_wakes_by_issuers; /* futex wakes an issuing call made */
  uint64_t thread_sleeps;           /* timed sleeps */
  uint64_t thread_parks;            /* untimed waits (nothing pending) */
  /* The thread's pacing (see PACING): streams that entered and left the
   * batching state (the difference: streams batching now, or destroyed
   * while batching). */
  uint64_t batch_enters;
  uint64_t batch_exits;
  /* Keeps the layer ran (operations released: one per operation, a NULL
   * keep included), by cause, counted since the context was created —
   * before the engine was enabled too. Keeps run by ledger calls made
   * directly on slc_context_ledger(), not through the layer, and by
   * slc_context_destroy, are not counted. keeps_run is their sum. */
  uint64_t keeps_run;
  uint64_t keeps_by_cause[SLC_CAUSE_COUNT];
} slc_engine_stats;

int slc_engine_stats_get(slc_context *c, slc_engine_stats *out);

/* The counters of one device's engine (DEVICES): its streams' markers,
 * releases and polls, and its thread's waits (with one_thread: the one
 * thread's, the same for every device). keeps_run and keeps_by_cause are
 * 0: keeps are counted per context only (slc_engine_stats_get). The
 * context's stats are the sum over its devices. Same snapshot rules.
 * LDG_EINVAL: c or out NULL, the engine not enabled, device not in
 * [0, slc_device_count(c)). */
int slc_engine_device_stats_get(slc_context *c, int device,
                                slc_engine_stats *out);

/* One stream's progress, for a user debugging a stuck buffer. */
typedef struct slc_stream_progress {
  uint64_t stream_id;
  ldg_seq enqueued_mark;   /* ldg_mark */
  ldg_seq released_mark;   /* the highest mark the engine released to */
  ldg_seq marked;          /* the highest mark a marker covers */
  size_t pending;          /* ldg_pending_count */
  size_t markers_pending;  /* markers recorded, not yet found done */
  uint64_t oldest_marker_age_ns; /* age of the oldest pending marker (0: none) */
  CUresult engine_error;   /* sticky engine error, CUDA_SUCCESS if none */
  bool engine_driven;      /* the engine is enabled (and the handle live) */
} slc_stream_progress;

/* LDG_EINVAL: s or out NULL. Callable from any thread while s is alive. */
int slc_stream_progress_get(slc_stream *s, slc_stream_progress *out);

/* LDG_OK, or SLC_EDRIVER with *cu (may be NULL) set to the query's error
 * once the stream's engine error is sticky. LDG_EINVAL: s NULL. */
int slc_stream_engine_error(const slc_stream *s, CUresult *cu);

/* Inside a keep: LDG_OK, its work was proven complete (see FAILURES: no
 * path drops an entry without proof; SLC_EDRIVER would say one did).
 * Outside a keep: LDG_OK. */
int slc_keep_status(void);

#ifdef __cplusplus
}
#endif

#endif /* STREAMLEDGER_CUDA_SL_ENGINE_H */
