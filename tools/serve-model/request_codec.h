// serve-model's request and response bodies, with no HTTP in sight: a predict body (JSON
// {"inputs": {NAME: nested lists}}, a .npy for a one-input model, or an .npz with one member per
// input) becomes the model's input tensors, checked against the model's inputs (names, dtype,
// rank, fixed dims) before anything runs; the outputs go back as JSON, .npy or .npz. JSON is read
// as events (json_reader.h) by a handler that writes numbers straight into typed buffers (no
// document tree: memory stays a small multiple of the tensors) and bounds nesting; an .npz's
// claimed sizes are summed and held to a limit before any member is inflated. Every function is
// pure (no I/O, no globals, no exceptions out): ParsePredictBody is the fuzzing entry point.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "whittle/session.h"
#include "whittle/status.h"
#include "whittle/tensor.h"

namespace whittle::serve {

enum class BodyFormat { kJson, kNpy, kNpz };

// "application/json" (also none, text/plain, and curl -d's application/x-www-form-urlencoded) -> kJson; "application/x-npy" -> kNpy;
// "application/x-npz", "application/zip" -> kNpz; parameters (";charset=...") ignored. Anything
// else is kUnimplemented (a server answers 415).
StatusOr<BodyFormat> FormatFromContentType(const std::string& content_type);
// The Content-Type a response in `f` carries.
const char* ContentTypeOf(BodyFormat f);

struct ParseLimits {
  int64_t max_decoded_bytes = int64_t{64} << 20;  // all input tensors together (npz: before inflating)
  int max_rank = 16;                              // JSON nesting of one input's lists
};

// The body as the model's inputs, or InvalidArgument with a one-line reason (a server answers 400).
// Every model input must be given exactly once, with the model's dtype (JSON numbers are converted
// to it: integers must be whole and in range, bool takes true/false/0/1; .npy/.npz must carry it
// exactly), its rank and its fixed dims; names the model does not have are refused.
StatusOr<std::map<std::string, Tensor>> ParsePredictBody(BodyFormat format, const std::string& body,
                                                          const std::vector<IoInfo>& inputs,
                                                          const ParseLimits& limits = {});

// Checks one tensor against the model input it is fed to (dtype, rank, fixed dims).
Status CheckInput(const IoInfo& info, const Tensor& t);

// The outputs (in the order of `outputs`) as a body: JSON {"outputs": {NAME: nested lists}}
// (floats in their shortest round-trip form, NaN and infinities as null, bool as true/false),
// .npy (a one-output model; several outputs answer an .npz instead: *format_out says which), or
// .npz (stored members NAME.npy).
StatusOr<std::string> EncodeOutputs(BodyFormat format, const std::vector<IoInfo>& outputs,
                                    const std::vector<Tensor>& values, BodyFormat* format_out);

// An uncompressed .npz archive in memory (np.savez's layout: members NAME.npy).
StatusOr<std::string> SerializeNpzStored(const std::vector<std::pair<std::string, Tensor>>& arrays);

// The sum of the uncompressed sizes an .npz (zip) archive's central directory claims, ZIP64
// fields included; InvalidArgument when the directory cannot be found or read inside the bytes.
StatusOr<uint64_t> ZipClaimedBytes(const std::string& bytes);

// `s` made safe for a one-line message: control bytes replaced, at most max_len bytes kept.
std::string OneLine(const std::string& s, size_t max_len = 200);

}  // namespace whittle::serve
