"""An allocation trace of serve.py's workload, derived from the model's shapes
(issue 14), for bench/torch_trace.c when no GPU run's own trace
(SL_TORCH_TRACE) is at hand. No torch needed.

    python3 llama_trace.py --threads 1 --requests 40 > t1.trace

What it emulates: serve.py's LlamaForCausalLM (transformers config: hidden
512, intermediate 1408, 4 layers, 8 heads, vocabulary 8000, float32, SDPA
attention, use_cache on) moved to the GPU parameter by parameter, then
per thread two warm-up requests and the requests, each: the input ids to
the GPU, the forward pass as the model's Python code allocates and drops
its tensors (RMSNorm: pow, mean, add, rsqrt, mul, weight mul; q/k/v
projections; rotary embedding: mul, neg, cat, mul, add, for q and k; the
key/value cache alive until the output is dropped; attention output and its
contiguous transpose; o projection; residual adds; gate, SiLU, up, mul,
down), the logits of every position, the last position's logits made
contiguous for the copy back, then the frees. Each thread's first matrix
multiply allocates cuBLAS's workspace for its stream (32 MiB on an H200,
PyTorch keeps it for the process). Thread 0 uses the default
stream (0), thread t > 0 its own stream. Several threads interleave as
under Python's GIL: a thread runs until it blocks in the copy back (the
synchronising .cpu()) or until a switch after 50-250 operations (seeded,
so a trace is reproducible); what a thread frees after its copy back
happens when it runs again.
It is an approximation of PyTorch's real sequence (an extra temporary here
or there, an order of frees within a statement); a GPU run's trace
(gpu_run.sh writes one) is the real one.
"""
import argparse
import random
import sys

p = argparse.ArgumentParser()
p.add_argument("--threads", type=int, default=1)
p.add_argument("--requests", type=int, default=40,
               help="requests per thread after two warm-up requests")
p.add_argument("--batch", type=int, default=8)
p.add_argument("--seq", type=int, default=128)
p.add_argument("--seed", type=int, default=1)
args = p.parse_args()
if args.threads < 1 or args.requests < 0 or args.batch < 1 or args.seq < 1:
    p.error("threads, batch and seq must be positive, requests >= 0")

H, I, V, L, NH = 512, 1408, 8000, 4, 8
HD = H // NH
F32, I64 = 4, 8
B, S = args.batch, args.seq


class Tracer:
    def __init__(self, out):
        self.out = out
        self.next_ptr = 0x7f0000000000
        self.live = {}

    def alloc(self, tid, stream, size):
        ptr = self.next_ptr
        self.next_ptr += (size + 511) // 512 * 512
        self.live[ptr] = (size, stream)
        self.out.write(f"a {tid} {stream:#x} {size} {ptr:#x}\n")
        return ptr

    def free(self, tid, ptr):
        size, stream = self.live.pop(ptr)
        self.out.write(f"f {tid} {stream:#x} {size} {ptr:#x}\n")


def rmsnorm(ops, x):
    """LlamaRMSNorm on x (B, S, H): yields ops, returns the output name."""
    ops.append(("a", "pow", B * S * H * F32))
    ops.append(("a", "var", B * S * F32))
    ops.append(("f", "pow"))
    ops.append(("a", "vpe", B * S * F32))
    ops.append(("a", "rsq", B * S * F32))
    ops.append(("f", "vpe"))
    ops.append(("a", "nrm", B * S * H * F32))
    ops.append(("f", "rsq"))
    ops.append(("a", x + "n", B * S * H * F32))
    ops.append(("f", "nrm"))
    ops.append(("f", "var"))
    return x + "n"


def rotary(ops, x):
    act = B * S * H * F32
    ops.append(("a", x + "c", act))      # x * cos
    ops.append(("a", x + "neg", act // 2))  # -x2
    ops.append(("a", x + "cat", act))    # cat(-x2, x1)
    ops.append(("f", x + "neg"))
    ops.append(("a", x + "rs", act))     # * sin
    ops.append(("f", x + "cat"))
    ops.append(("a", x + "e", act))      # x*cos + rotate_half(x)*sin
    ops.append(("f", x + "c"))
    ops.append(("f", x + "rs"))
    ops.append(("f", x))                 # the projection, replaced
    return x + "e"


WORKSPACE = 32 << 20  # cuBLAS's, per (handle, stream), sm90


def request_ops(first):
    """One serve_one: ("a", name, size) / ("f", name) / ("block",); the
    thread's first also allocates the cuBLAS workspace (never freed)."""
    ops = [("a", "ids", B * S * I64), ("a", "h0", B * S * H * F32),
           ("a", "cpos", S * I64),
           ("a", "posf", S * F32), ("a", "freqs", (HD // 2) * S * F32),
           ("a", "emb", S * HD * F32), ("f", "freqs"),
           ("a", "cos0", S * HD * F32), ("a", "cos", S * HD * F32),
           ("f", "cos0"),
           ("a", "sin0", S * HD * F32), ("a", "sin", S * HD * F32),
           ("f", "sin0"), ("f", "emb"), ("f", "posf")]
    act, mlp = B * S * H * F32, B * S * I * F32
    h = "h0"
    kv = []
    for layer in range(L):
        x = rmsnorm(ops, h)
        q, k, v = f"q{layer}", f"k{layer}", f"v{layer}"
        if first and layer == 0:
            ops.append(("a", "cublas_workspace", WORKSPACE))
        for t in (q, k, v):
            ops.append(("a", t, act))
        qe, ke = rotary(ops, q), rotary(ops, k)
        kv += [ke, v]                                 # the cache keeps them
        ops.append(("a", "att", act))                 # SDPA output
        ops.append(("a", "attT", act))                # transpose.contiguous
        ops.append(("f", "att"))
        ops.append(("a", "o", act))                   # o_proj
        ops.append(("f", "attT"))
        ops.append(("f", qe))
        ops.append(("f", x))
        h2 = f"h{layer}a"
        ops.append(("a", h2, act))                    # residual + attention
        ops.append(("f", "o"))
        ops.append(("f", h))
        x2 = rmsnorm(ops, h2)
        ops += [("a", "g", mlp), ("a", "silu", mlp), ("f", "g"),
                ("a", "up", mlp), ("a", "gu", mlp), ("f", "silu"),
                ("f", "up"), ("a", "down", act), ("f", "gu"), ("f", x2)]
        h3 = f"h{layer + 1}"
        ops += [("a", h3, act), ("f", "down"), ("f", h2)]
        h = h3
    x = rmsnorm(ops, h)
    ops.append(("f", h))
    ops.append(("a", "logits", B * S * V * F32))
    ops.append(("f", x))
    ops += [("f", "cos"), ("f", "sin"), ("f", "cpos")]
    ops += [("f", t) for t in kv]                     # the output dropped
    ops.append(("a", "last", B * V * F32))            # contiguous for .cpu()
    ops.append(("block",))                            # synchronises
    ops += [("f", "last"), ("f", "logits"), ("f", "ids")]
    return ops


def main():
    out = sys.stdout
    out.write("# sl_torch trace v1: a|f TID STREAM SIZE PTR "
              f"(llama_trace.py --threads {args.threads} --requests "
              f"{args.requests} --batch {B} --seq {S} --seed {args.seed})\n")
    tr = Tracer(out)
    # The model: parameters in module order, then the rotary buffer.
    params = [V * H * F32]
    for _ in range(L):
        params += [H * H * F32] * 4 + [I * H * F32] * 3 + [H * F32] * 2
    params += [H * F32, (HD // 2) * F32, V * H * F32]
    for size in params:
        tr.alloc(1, 0, size)
    rng = random.Random(args.seed)
    T = args.threads
    # Per thread: its pending ops (the warm-up's two requests, then its
    # share of the requests) and its tensors by name.
    todo = []
    for t in range(T):
        ops = []
        for r in range(2 + args.requests):
            ops += request_ops(r == 0)
        todo.append(ops)
    names = [dict() for _ in range(T)]
    pos = [0] * T
    t = 0
    while any(pos[i] < len(todo[i]) for i in range(T)):
        if pos[t] < len(todo[t]):
            tid, stream = t + 1, 0 if t == 0 else 0x1000 + t
            budget = rng.randint(50, 250)
            while pos[t] < len(todo[t]) and budget > 0:
                op = todo[t][pos[t]]
                pos[t] += 1
                budget -= 1
                if op[0] == "a":
                    names[t][op[1]] = tr.alloc(tid, stream, op[2])
                elif op[0] == "f":
                    tr.free(tid, names[t].pop(op[1]))
                elif T > 1:
                    break  # blocks in the copy back: another thread runs
        t = (t + 1) % T


main()
