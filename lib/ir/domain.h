// Operator domains. Whittle's own ops (QConv, QGemm, Attention, the blocked-layout ops, the
// training graph's gradient ops) live in one domain; "" is the default ONNX domain (ai.onnx).
#pragma once

namespace whittle {

inline constexpr const char* kWhittleDomain = "ai.whittle";
// ONNX Runtime's contrib ops that its tools write and Whittle runs (MatMulNBits).
inline constexpr const char* kMicrosoftDomain = "com.microsoft";

}  // namespace whittle
