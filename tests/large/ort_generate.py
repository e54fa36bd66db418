#!/usr/bin/env python3
"""Greedy generation with ONNX Runtime on a decoder-only LM with a KV cache (the layout
tests/large/make_decoder.py writes, which is Hugging Face/Optimum's): the reference for Whittle's
`run-model --generate`.

Runs the prompt as one prefill (past length 0), then N decode steps of one token each, feeding
present.{i}.key/.value back as past_key_values.{i}.key/.value. Prints prefill tokens/s (the median of
--prefill-runs runs), decode tokens/s (the median step) and the generated ids: the prefill's argmax, then each step's.

    python tests/large/ort_generate.py MODEL.onnx [--steps 32] [--threads 2]
        [--prompt-ids 1,2,3 | --prompt-npy IDS.npy] [--dump-logits OUT.npz] [--no-cache] [--json OUT.json]

--dump-logits writes float32 arrays `prefill` [batch, prompt, vocab] and `step_0` ... `step_{N-1}`
[batch, 1, vocab] (plus `ids`, the generated ids [batch, N+1]). --no-cache recomputes the whole prefix
every step with an empty past (past length 0), writing the same arrays (a step's logits are those of
the last position), so that the two modes' dumps can be compared. --prompt-npy takes int64 ids of
shape [seq] or [batch, seq]. Note: on a QDQ 4-bit model (DequantizeLinear block_size + MatMul) ONNX
Runtime fuses the pair into MatMulNBits with accuracy level 4 (int8 activations) unless
--session-config session.qdq_matmulnbits_accuracy_level=0 (or --opt-level basic). Works on fp32 and fp16 models and on MatMulNBits-quantized ones
(tests/large/ort_quantize_nbits.py). Needs numpy and onnxruntime.
"""
import argparse
import json
import re
import statistics
import sys
import time

import numpy as np
import onnxruntime as ort

# A fixed prompt of 16 ids, all below 2048 so it fits the tiny model's vocabulary.
DEFAULT_PROMPT = [1, 450, 1701, 17, 1190, 338, 263, 1243, 871, 310, 278, 1024, 8, 1939, 411, 889]

NP_TYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(bfloat16)": None}


def layout(sess):
    """The model's cache layout: [(past key name, past value name, present key, present value)], kv heads,
    head dim, cache dtype, vocabulary size."""
    ins = {i.name: i for i in sess.get_inputs()}
    outs = {o.name for o in sess.get_outputs()}
    for need in ("input_ids", "attention_mask"):
        if need not in ins:
            sys.exit(f"the model has no input {need!r}; inputs: {sorted(ins)}")
    layers = sorted(int(m.group(1)) for n in ins if (m := re.fullmatch(r"past_key_values\.(\d+)\.key", n)))
    if layers != list(range(len(layers))):
        sys.exit(f"past_key_values.*.key inputs are not numbered 0..n-1: {layers}")
    cache = []
    for i in layers:
        names = (f"past_key_values.{i}.key", f"past_key_values.{i}.value", f"present.{i}.key", f"present.{i}.value")
        if names[1] not in ins or names[2] not in outs or names[3] not in outs:
            sys.exit(f"layer {i}: expected inputs/outputs {names}")
        cache.append(names)
    if cache:
        shape = ins[cache[0][0]].shape
        kv_heads, head_dim = shape[1], shape[3]
        if not isinstance(kv_heads, int) or not isinstance(head_dim, int):
            sys.exit(f"{cache[0][0]} has shape {shape}; its kv-heads and head dims must be fixed")
        dtype = NP_TYPES.get(ins[cache[0][0]].type)
        if dtype is None:
            sys.exit(f"unsupported cache type {ins[cache[0][0]].type}")
    else:
        kv_heads = head_dim = 0
        dtype = np.float32
    logits = [o for o in sess.get_outputs() if o.name == "logits"]
    if not logits:
        sys.exit("the model has no output 'logits'")
    vocab = logits[0].shape[-1]
    return cache, kv_heads, head_dim, dtype, vocab, "position_ids" in ins


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--steps", type=int, default=32, help="decode steps after the prefill (default 32)")
    ap.add_argument("--threads", type=int, default=0, help="intra-op threads (0: ONNX Runtime's default)")
    ap.add_argument("--prompt-ids", help="comma-separated token ids (default: a fixed 16-id prompt)")
    ap.add_argument("--prompt-npy", help="int64 ids, [seq] or [batch, seq]")
    ap.add_argument("--dump-logits", metavar="OUT.npz")
    ap.add_argument("--no-cache", action="store_true", help="recompute the whole prefix every step")
    ap.add_argument("--warmup", type=int, default=1, help="untimed prefill runs first (default 1)")
    ap.add_argument("--prefill-runs", type=int, default=10, help="timed prefill runs; the median counts (default 10)")
    ap.add_argument("--provider", default="CPUExecutionProvider", help="e.g. CUDAExecutionProvider")
    ap.add_argument("--opt-level", choices=["disable", "basic", "extended", "all"], default="all",
                    help="ONNX Runtime graph optimisation level (default all)")
    ap.add_argument("--session-config", action="append", default=[], metavar="KEY=VALUE",
                    help="a session config entry, e.g. session.qdq_matmulnbits_accuracy_level=0 (repeatable)")
    ap.add_argument("--json", metavar="OUT.json", help="also write the figures and ids as JSON")
    a = ap.parse_args()

    if a.prompt_npy:
        prompt = np.load(a.prompt_npy).astype(np.int64)
    elif a.prompt_ids:
        prompt = np.array([int(x) for x in a.prompt_ids.split(",")], dtype=np.int64)
    else:
        prompt = np.array(DEFAULT_PROMPT, dtype=np.int64)
    if prompt.ndim == 1:
        prompt = prompt[None, :]
    if prompt.ndim != 2 or prompt.shape[1] == 0:
        sys.exit(f"the prompt must be [seq] or [batch, seq], not {prompt.shape}")

    so = ort.SessionOptions()
    if a.threads:
        so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = {"disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
                                   "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
                                   "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
                                   "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}[a.opt_level]
    for kv in a.session_config:
        k, _, v = kv.partition("=")
        so.add_session_config_entry(k, v)
    t0 = time.perf_counter()
    sess = ort.InferenceSession(a.model, so, providers=[a.provider])
    load_s = time.perf_counter() - t0
    cache, kv_heads, head_dim, dtype, vocab, has_pos = layout(sess)
    if isinstance(vocab, int) and prompt.max() >= vocab:
        sys.exit(f"prompt id {prompt.max()} is outside the vocabulary ({vocab})")
    batch = prompt.shape[0]
    out_names = ["logits"] + [n for names in cache for n in names[2:]]

    def empty_past():
        return [np.zeros((batch, kv_heads, 0, head_dim), dtype=dtype) for _ in range(2 * len(cache))]

    def run(ids, past, start):
        """One run: ids [batch, seq] at positions start.., past [2*layers] arrays of length start."""
        seq = ids.shape[1]
        feed = {"input_ids": ids, "attention_mask": np.ones((batch, start + seq), dtype=np.int64)}
        if has_pos:
            feed["position_ids"] = np.broadcast_to(np.arange(start, start + seq, dtype=np.int64), (batch, seq)).copy()
        for (pk, pv, _, _), k, v in zip(cache, past[0::2], past[1::2]):
            feed[pk], feed[pv] = k, v
        t = time.perf_counter()
        res = sess.run(out_names, feed)
        return res[0], res[1:], time.perf_counter() - t

    for _ in range(a.warmup):
        run(prompt, empty_past(), 0)
    prefill_runs = []
    for _ in range(max(1, a.prefill_runs)):
        logits, present, dt = run(prompt, empty_past(), 0)
        prefill_runs.append(dt)
    prefill_s = statistics.median(prefill_runs)
    dumps = {"prefill": logits.astype(np.float32)}
    ids = prompt
    generated = [logits[:, -1].argmax(-1)]
    step_s = []
    for step in range(a.steps):
        nxt = generated[-1][:, None].astype(np.int64)
        if a.no_cache:
            ids = np.concatenate([ids, nxt], axis=1)
            logits, _, dt = run(ids, empty_past(), 0)
            logits = logits[:, -1:]
        else:
            start = prompt.shape[1] + step
            logits, present, dt = run(nxt, present, start)
        step_s.append(dt)
        dumps[f"step_{step}"] = logits.astype(np.float32)
        generated.append(logits[:, -1].argmax(-1))
    gen = np.stack(generated, axis=1)

    prefill_tps = batch * prompt.shape[1] / prefill_s
    decode_med = statistics.median(step_s) if step_s else float("nan")
    decode_tps = batch / decode_med if step_s else float("nan")
    print(f"model {a.model}: {len(cache)} layers, {kv_heads} kv heads x {head_dim}, vocab {vocab}, "
          f"{np.dtype(dtype).name} cache; {sess.get_providers()[0]}, threads {a.threads or 'default'}; "
          f"load {load_s:.2f} s")
    print(f"prefill: batch {batch} x {prompt.shape[1]} tokens, median of {len(prefill_runs)} runs {prefill_s * 1e3:.2f} ms "
          f"= {prefill_tps:.1f} tokens/s")
    if step_s:
        print(f"decode{' (no cache)' if a.no_cache else ''}: {len(step_s)} steps, median {decode_med * 1e3:.2f} ms "
              f"(min {min(step_s) * 1e3:.2f}, max {max(step_s) * 1e3:.2f}) = {decode_tps:.1f} tokens/s")
    for b in range(batch):
        print(f"generated ids[{b}]: {' '.join(str(int(x)) for x in gen[b])}")
    if a.dump_logits:
        dumps["ids"] = gen
        np.savez(a.dump_logits, **dumps)
        print(f"wrote {a.dump_logits}: prefill + {len(step_s)} steps")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"model": a.model, "threads": a.threads, "provider": a.provider, "no_cache": a.no_cache,
                       "batch": batch, "prompt_tokens": int(prompt.shape[1]), "steps": len(step_s),
                       "prefill_s": prefill_s, "prefill_tokens_per_s": prefill_tps,
                       "decode_median_s": decode_med, "decode_tokens_per_s": decode_tps,
                       "decode_step_s": step_s, "generated_ids": gen.tolist()}, f, indent=1)


if __name__ == "__main__":
    main()
