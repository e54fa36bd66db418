"""NumPy reference implementations of the com.microsoft contrib ops that ORT's transformer optimizer writes,
following the semantics measured against onnxruntime 1.32 CPU kernels (see SEMANTICS.md, checks.py).

All math is done in float64 and cast back to the input dtype. Missing optional inputs are None.
"""
import math

import numpy as np

_erf = np.vectorize(math.erf, otypes=[np.float64])


# ---------------------------------------------------------------- activations
def gelu_erf(x):
    x = np.asarray(x, np.float64)
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    x = np.asarray(x, np.float64)
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def Gelu(X):
    return gelu_erf(X).astype(X.dtype)


def BiasGelu(A, B):
    return gelu_erf(A.astype(np.float64) + B).astype(A.dtype)


def FastGelu(X, bias=None):
    x = X.astype(np.float64) + (0 if bias is None else bias)
    return gelu_tanh(x).astype(X.dtype)


def QuickGelu(X, alpha=1.702):
    x = X.astype(np.float64)
    return (x / (1.0 + np.exp(-alpha * x))).astype(X.dtype)


def BiasSplitGelu(X, bias):
    x = X.astype(np.float64) + bias
    h = x.shape[-1] // 2
    return (x[..., :h] * gelu_erf(x[..., h:])).astype(X.dtype)


def BiasAdd(X, bias, skip):
    return (X.astype(np.float64) + bias + skip).astype(X.dtype)


# ---------------------------------------------------------------- normalizations
def _ln(x, gamma, beta, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    inv = 1.0 / np.sqrt(var + eps)
    y = (x - mean) * inv * gamma
    if beta is not None:
        y = y + beta
    return y, mean, inv


def SkipLayerNormalization(input, skip, gamma, beta=None, bias=None, epsilon=1e-12):
    """-> (output, mean, inv_std_var, input_skip_bias_sum). mean/inv_std_var have shape input.shape[:-1] + (1,)."""
    x = input.astype(np.float64) + np.broadcast_to(skip, input.shape)
    if bias is not None:
        x = x + bias
    y, mean, inv = _ln(x, gamma, beta, np.float32(epsilon))
    dt = input.dtype
    return y.astype(dt), mean.astype(np.float32), inv.astype(np.float32), x.astype(dt)


def SkipSimplifiedLayerNormalization(input, skip, gamma, bias=None, epsilon=1e-12):
    """-> (output, mean(unset by the CPU kernel), inv_std_var, input_skip_bias_sum)."""
    x = input.astype(np.float64) + np.broadcast_to(skip, input.shape)
    if bias is not None:
        x = x + bias
    inv = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + np.float32(epsilon))
    dt = input.dtype
    return (x * inv * gamma).astype(dt), None, inv.astype(np.float32), x.astype(dt)


def SimplifiedLayerNormalization(X, scale, axis=-1, epsilon=1e-5, stash_type=1):
    """ai.onnx-domain ORT op (RMSNorm). Normalizes over dims [axis, rank). -> (Y, inv_std_var)."""
    x = X.astype(np.float64)
    axis = axis % X.ndim
    axes = tuple(range(axis, X.ndim))
    inv = 1.0 / np.sqrt((x * x).mean(axes, keepdims=True) + np.float32(epsilon))
    return (x * inv * scale).astype(X.dtype), inv.astype(np.float32)


def EmbedLayerNormalization(input_ids, segment_ids, word_embedding, position_embedding, segment_embedding,
                            gamma, beta, mask=None, position_ids=None, epsilon=1e-12):
    """-> (output [B,S,H], mask_index int32 [B], embedding_sum [B,S,H])."""
    B, S = input_ids.shape
    for t, table in ((input_ids, word_embedding), (segment_ids, segment_embedding)):
        if t is not None and table is not None and (t.min() < 0 or t.max() >= table.shape[0]):
            raise IndexError("input index out of range")
    if position_ids is None:
        pos = np.broadcast_to(np.arange(S), (B, S))
    else:
        pos = np.broadcast_to(position_ids, (B, S))
    if pos.max() >= position_embedding.shape[0] or pos.min() < 0:
        raise IndexError("input index out of range")
    e = word_embedding[input_ids].astype(np.float64) + position_embedding[pos]
    if segment_ids is not None and segment_embedding is not None:
        e = e + segment_embedding[segment_ids]
    y, _, _ = _ln(e, gamma, beta, np.float32(epsilon))
    if mask is None:
        mask_index = np.zeros((B,), np.int32)
    else:
        mask_index = (mask == 1).sum(-1).astype(np.int32)   # counts entries equal to 1 (not a position)
    dt = word_embedding.dtype
    return y.astype(dt), mask_index, e.astype(dt)


# ---------------------------------------------------------------- matmuls
def FusedMatMul(A, B, alpha=1.0, transA=0, transB=0, transBatchA=0, transBatchB=0):
    def prep(M, trans_batch, trans):
        M = M.astype(np.float64)
        if trans_batch and M.ndim >= 3:      # [d0, d1..d(r-2), d(r-1)] -> [d1..d(r-2), d0, d(r-1)]
            M = np.moveaxis(M, 0, -2)
        if trans and M.ndim >= 2:
            M = np.swapaxes(M, -1, -2)
        return M
    return (alpha * np.matmul(prep(A, transBatchA, transA), prep(B, transBatchB, transB))).astype(A.dtype)


_ACT = {
    "Relu": lambda x, a, b, g: np.maximum(x, 0),
    "Tanh": lambda x, a, b, g: np.tanh(x),
    "Sigmoid": lambda x, a, b, g: 1 / (1 + np.exp(-x)),
    "LeakyRelu": lambda x, a, b, g: np.where(x >= 0, x, (0.01 if a is None else a) * x),
    "HardSigmoid": lambda x, a, b, g: np.clip((0.2 if a is None else a) * x + (0.5 if b is None else b), 0, 1),
}


def FusedGemm(A, B, C=None, alpha=1.0, beta=1.0, transA=0, transB=0, activation=None, activation_alpha=None,
              activation_beta=None, activation_gamma=None):
    a = A.astype(np.float64).T if transA else A.astype(np.float64)
    b = B.astype(np.float64).T if transB else B.astype(np.float64)
    y = alpha * a @ b + (0 if C is None else beta * C)
    if activation:
        y = _ACT[activation](y, activation_alpha, activation_beta, activation_gamma)
    return y.astype(A.dtype)


# ---------------------------------------------------------------- attention
def attention_mask_bias(mask_index, B, S, P, T, mask_filter_value=-10000.0, unidirectional=0):
    """Additive [B, S, T] bias built from mask_index (int32) exactly as the CPU kernel does:
    0 where attended, mask_filter_value where masked by mask_index; future keys (unidirectional) get the lowest
    float32 on top of that, independent of mask_filter_value."""
    m = np.zeros((B, S, T), np.float64)
    if mask_index is not None:
        d = mask_index.shape
        j = np.arange(T)
        if len(d) == 1 and d[0] in (B, 3 * B + 2):           # right padding: key j >= end is masked
            # (3B+2 = [key_len x B, cu_seqlens_q x B+1, cu_seqlens_kv x B+1]; the CPU kernel reads only key_len)
            m[:] = np.where(j[None, :] >= mask_index[:B, None], mask_filter_value, 0.0)[:, None, :]
        elif len(d) == 1 and d[0] == 2 * B:                  # + left padding: key j < start is masked
            end, start = mask_index[:B], np.minimum(mask_index[B:], T)
            bad = (j[None, :] >= end[:, None]) | (j[None, :] < start[:, None])
            m[:] = np.where(bad, mask_filter_value, 0.0)[:, None, :]
        elif len(d) == 2 and d[1] == 1:                      # [B,1] / [1,1]: dummy, same as no mask
            pass
        elif len(d) == 2:                                    # raw key padding mask [B, T]: > 0 keeps
            m[:] = np.where(mask_index > 0, 0.0, mask_filter_value)[:, None, :]
        elif len(d) == 3:                                    # [B, S, T]
            m[:] = np.where(mask_index > 0, 0.0, mask_filter_value)
        elif len(d) == 4:                                    # Megatron [B, 1, M, M]: rows P..P+S, cols 0..T
            m[:] = np.where(mask_index[:, 0, P:P + S, :T] > 0, 0.0, mask_filter_value)
        else:
            raise ValueError("mask_index rank")
    if unidirectional and S > 1:
        i = np.arange(S)[:, None]
        j = np.arange(T)[None, :]
        m = m + np.where(j > P + i, np.finfo(np.float32).min, 0.0)[None]
    return m


def Attention(input, weights, bias=None, mask_index=None, past=None, attention_bias=None, past_sequence_length=None,
              num_heads=None, unidirectional=0, qkv_hidden_sizes=None, scale=None, mask_filter_value=None,
              do_rotary=0, past_present_share_buffer=0, rotary_embedding_dim=None):
    """-> (output [B, S, D_v], present [2, B, N, P+S, H] or None)."""
    assert not do_rotary and not past_present_share_buffer, "not modelled"
    x = input.astype(np.float64)
    Bsz, S, _ = x.shape
    qkv = x @ weights.astype(np.float64)
    if bias is not None:
        qkv = qkv + bias
    if qkv_hidden_sizes is None or len(qkv_hidden_sizes) == 0:
        dq = dk = dv = weights.shape[1] // 3
    else:
        dq, dk, dv = qkv_hidden_sizes
    N = num_heads
    q, k, v = qkv[..., :dq], qkv[..., dq:dq + dk], qkv[..., dq + dk:dq + dk + dv]
    H, Hv = dq // N, dv // N

    def heads(t, h):
        return t.reshape(Bsz, S, N, h).transpose(0, 2, 1, 3)
    q, k, v = heads(q, H), heads(k, H), heads(v, Hv)
    P = 0
    if past is not None:
        P = past.shape[3]
        k = np.concatenate([past[0].astype(np.float64), k], axis=2)
        v = np.concatenate([past[1].astype(np.float64), v], axis=2)
    T = P + S
    sc = (1.0 / math.sqrt(H)) if not scale else scale
    mfv = -10000.0 if mask_filter_value is None else mask_filter_value
    s = sc * (q @ k.transpose(0, 1, 3, 2))
    if attention_bias is not None:
        s = s + attention_bias
    # the kernel adds the mask to the scaled scores in float32: emulate that rounding (it matters for rows
    # whose keys are all masked: s - 10000 loses ~1e-3 of precision)
    s = (s + attention_mask_bias(mask_index, Bsz, S, P, T, mfv, unidirectional)[:, None]).astype(np.float32)
    s = s.astype(np.float64)
    s = s - s.max(-1, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(-1, keepdims=True)
    out = (p @ v).transpose(0, 2, 1, 3).reshape(Bsz, S, N * Hv).astype(input.dtype)
    present = np.stack([k, v]).astype(input.dtype) if H == Hv else None
    return out, present


OPS = {
    "Gelu": Gelu, "BiasGelu": BiasGelu, "FastGelu": FastGelu, "QuickGelu": QuickGelu,
    "BiasSplitGelu": BiasSplitGelu, "BiasAdd": BiasAdd,
    "SkipLayerNormalization": SkipLayerNormalization,
    "SkipSimplifiedLayerNormalization": SkipSimplifiedLayerNormalization,
    "EmbedLayerNormalization": EmbedLayerNormalization,
    "FusedMatMul": FusedMatMul, "FusedGemm": FusedGemm, "Attention": Attention,
}
