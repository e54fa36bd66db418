#include "whittle/decoder.h"

#include <map>

namespace whittle {
namespace {

int IndexOf(const std::vector<IoInfo>& v, const std::string& name) {
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i].name == name) return static_cast<int>(i);
  return -1;
}

// present.<i>.key for past_key_values.<i>.key (also past.<i>.key -> present.<i>.key).
std::string PresentName(const std::string& past) {
  for (const char* prefix : {"past_key_values", "past"}) {
    const std::string p(prefix);
    if (past.compare(0, p.size() + 1, p + ".") == 0) return "present" + past.substr(p.size());
  }
  return "";
}

}  // namespace

StatusOr<std::unique_ptr<Decoder>> Decoder::Create(const Session& session, bool in_place) {
  std::unique_ptr<Decoder> d(new Decoder(session));
  const std::vector<IoInfo>& in = session.inputs();
  const std::vector<IoInfo>& out = session.outputs();
  const int ids = IndexOf(in, "input_ids");
  if (ids < 0 || in[static_cast<size_t>(ids)].dtype != DType::kInt64)
    return InvalidArgument("not a decoder model: it has no int64 input 'input_ids'");
  d->logits_index_ = IndexOf(out, "logits");
  if (d->logits_index_ < 0) return InvalidArgument("not a decoder model: it has no output 'logits'");
  const SymShape& ls = out[static_cast<size_t>(d->logits_index_)].shape;
  if (ls.size() != 3 || !ls[2].known())
    return InvalidArgument("not a decoder model: logits must be [batch, seq, vocab] with a known vocab, got " +
                           SymShapeToString(ls));
  d->vocab_ = ls[2].value;
  for (const IoInfo& i : in) {
    if (i.name == "input_ids") continue;
    if (i.name == "attention_mask") {
      d->has_mask_ = true;
      continue;
    }
    if (i.name == "position_ids") {
      d->has_positions_ = true;
      continue;
    }
    const std::string present = PresentName(i.name);
    const int o = present.empty() ? -1 : IndexOf(out, present);
    if (o < 0)
      return InvalidArgument("decoder input '" + i.name + "' is neither input_ids, attention_mask, position_ids "
                             "nor a past_key_values.* cache with a present.* output");
    if (i.shape.size() != 4 || !i.shape[1].known() || !i.shape[3].known())
      return InvalidArgument("cache input '" + i.name + "' must be [batch, kv_heads, past, head_dim] with known heads "
                             "and head_dim, got " + SymShapeToString(i.shape));
    CacheSlot c;
    c.input = i.name;
    c.output = present;
    c.output_index = o;
    c.empty = {1, i.shape[1].value, 0, i.shape[3].value};
    d->cache_.push_back(std::move(c));
  }
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const CacheSlot& c : d->cache_) pairs.emplace_back(c.input, c.output);
  const Status bindable = in_place ? session.CheckCacheBindings(pairs) : InvalidArgument("not asked");
  d->in_place_ = bindable.ok() && !d->cache_.empty();
  d->copied_why_ = d->cache_.empty() ? "the model has no cache" : bindable.message();
  if (d->in_place_)
    for (CacheSlot& c : d->cache_) c.kv = std::make_unique<KvCache>(c.empty[1], c.empty[3]);
  return d;
}

Tensor Decoder::cache(int i) const {
  const CacheSlot& c = cache_.at(static_cast<size_t>(i));
  return c.kv ? c.kv->Dense() : c.value;
}

StatusOr<std::vector<float>> Decoder::Prefill(const std::vector<int64_t>& ids, RunStats* stats) {
  if (ids.empty()) return InvalidArgument("Decoder::Prefill: the prompt is empty");
  past_ = 0;
  for (CacheSlot& c : cache_) {
    if (c.kv) WH_RETURN_IF_ERROR(c.kv->Truncate(0));
    else c.value = Tensor(DType::kFloat32, c.empty);
  }
  return Run(ids, stats);
}

StatusOr<std::vector<float>> Decoder::Step(int64_t id, RunStats* stats) {
  if (past_ == 0) return InvalidArgument("Decoder::Step before Prefill");
  return Run({id}, stats);
}

StatusOr<std::vector<float>> Decoder::Run(const std::vector<int64_t>& ids, RunStats* stats) {
  const auto n = static_cast<int64_t>(ids.size());
  for (int64_t id : ids)
    if (id < 0 || id >= vocab_)
      return InvalidArgument("token id " + std::to_string(id) + " is outside the vocabulary of " +
                             std::to_string(vocab_));
  std::map<std::string, Tensor> feed;
  feed["input_ids"] = Tensor::FromVector<int64_t>({1, n}, ids);
  if (has_mask_) feed["attention_mask"] = Tensor::FromVector<int64_t>({1, past_ + n}, std::vector<int64_t>(past_ + n, 1));
  if (has_positions_) {
    std::vector<int64_t> pos(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) pos[static_cast<size_t>(i)] = past_ + i;
    feed["position_ids"] = Tensor::FromVector<int64_t>({1, n}, pos);
  }
  std::vector<Session::CacheBinding> bound;
  for (const CacheSlot& c : cache_) {
    if (c.kv) bound.push_back({c.input, c.output, c.kv.get()});
    else feed[c.input] = c.value;
  }
  WH_ASSIGN_OR_RETURN(std::vector<Tensor> out, in_place_ ? session_.RunWithCaches(feed, bound, stats)
                                                          : session_.Run(feed, stats));
  const Tensor& logits = out[static_cast<size_t>(logits_index_)];
  if (logits.dtype() != DType::kFloat32 || logits.rank() != 3 || logits.dim(1) != n || logits.dim(2) != vocab_)
    return Internal("decoder logits " + DimsToString(logits.dims()) + " do not fit " + std::to_string(n) +
                    " tokens of a " + std::to_string(vocab_) + "-word vocabulary");
  for (CacheSlot& c : cache_) {
    if (c.kv) {
      if (c.kv->length() != past_ + n)
        return Internal("cache '" + c.input + "' holds " + std::to_string(c.kv->length()) + " rows, expected " +
                        std::to_string(past_ + n));
      continue;
    }
    Tensor& p = out[static_cast<size_t>(c.output_index)];
    if (p.rank() != 4 || p.dim(2) != past_ + n)
      return Internal("cache output '" + c.output + "' has shape " + DimsToString(p.dims()) + ", expected past " +
                      std::to_string(past_ + n));
    c.value = std::move(p);
  }
  past_ += n;
  const float* last = logits.data<float>() + (n - 1) * vocab_;
  return std::vector<float>(last, last + vocab_);
}

}  // namespace whittle
