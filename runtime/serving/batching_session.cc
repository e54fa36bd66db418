// BatchingSession (include/whittle/batching_session.h): one mutex guards the queue, the current
// session, the stats and every request's state; callers wait on their own request's condition
// variable, workers on one shared one. A request stays in the queue until a worker takes it into
// a batch, so "still queued" (what a deadline or a full queue counts) is simply "in the list".
// The byte work (stacking and splitting rows) is in runtime/serving/batch_rows.cc.
#include "whittle/batching_session.h"

#include <algorithm>
#include <condition_variable>
#include <list>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

#include "runtime/serving/batch_rows.h"

namespace whittle {

namespace {

using Clock = BatchingSession::Clock;
constexpr size_t kRowBuckets = 16;

// One Run() call, on its caller's stack: the caller cannot return while a worker may touch it
// (it leaves only once done, or after taking it out of the queue itself under the mutex).
struct Request {
  std::map<std::string, Tensor> inputs;  // host tensors, checked against the session
  int64_t rows = 0;
  Clock::time_point enqueued, deadline;
  std::list<Request*>::iterator pos;  // valid while queued
  bool queued = false;
  bool done = false;
  Status status;
  std::vector<Tensor> outputs;
  std::condition_variable cv;
};

// A batch taken from the queue: its requests in queue order and the session it runs on (held for
// the whole run, so a Swap meanwhile cannot free it).
struct Batch {
  std::vector<Request*> requests;
  std::shared_ptr<const Session> session;
  int64_t rows = 0;
};

size_t RowBucket(int64_t rows) {
  size_t k = 0;
  while (k + 1 < kRowBuckets && (int64_t{1} << k) < rows) ++k;
  return k;
}

std::string Quoted(const std::string& name) { return "'" + name + "'"; }

bool SameQuant(const std::optional<QuantParams>& a, const std::optional<QuantParams>& b) {
  if (a.has_value() != b.has_value()) return false;
  return !a || (a->scale == b->scale && a->zero_point == b->zero_point && a->axis == b->axis);
}

// Whether two requests can share a run: the same input names, dtypes, ranks, dims after the
// batch axis and quantization.
bool Compatible(const Request& a, const Request& b) {
  if (a.inputs.size() != b.inputs.size()) return false;
  for (auto ia = a.inputs.begin(), ib = b.inputs.begin(); ia != a.inputs.end(); ++ia, ++ib) {
    if (ia->first != ib->first) return false;
    const Tensor& x = ia->second;
    const Tensor& y = ib->second;
    if (x.dtype() != y.dtype() || x.rank() != y.rank()) return false;
    if (!std::equal(x.dims().begin() + 1, x.dims().end(), y.dims().begin() + 1)) return false;
    if (!SameQuant(x.quant, y.quant)) return false;
  }
  return true;
}

// Whether requests for this session may be stacked: every input's batch axis is free. A model
// with a fixed first dim (an export at batch 1) runs each request alone.
bool Stackable(const Session& session) {
  for (const IoInfo& info : session.inputs())
    if (info.shape.empty() || info.shape[0].known()) return false;
  return true;
}

std::string ExpectedShape(const IoInfo& info) {
  return std::string(DTypeName(info.dtype)) + " " + SymShapeToString(info.shape);
}

// One input against the session's description of it; returns its rows.
StatusOr<int64_t> CheckInput(const IoInfo& info, const Tensor& t) {
  const std::string name = "input " + Quoted(info.name);
  if (info.kind != ValueKind::kTensor || !t.is_tensor())
    return InvalidArgument(name + ": BatchingSession batches tensors only (the model expects a " +
                           ValueKindName(info.kind) + ")");
  if (!t.defined()) return InvalidArgument(name + " has no value");
  if (t.dtype() != info.dtype)
    return InvalidArgument(name + " is " + DTypeName(t.dtype()) + ", the model expects " + ExpectedShape(info));
  if (DTypeSize(t.dtype()) == 0)
    return InvalidArgument(name + ": dtype " + DTypeName(t.dtype()) +
                           " has no fixed element size, so its rows cannot be stacked");
  if (t.rank() == 0)
    return InvalidArgument(name + " is a scalar; every input needs the batch as its first axis (the model expects " +
                           ExpectedShape(info) + ")");
  if (!info.shape.empty()) {
    if (static_cast<size_t>(t.rank()) != info.shape.size())
      return InvalidArgument(name + " has dims " + DimsToString(t.dims()) + ", the model expects " +
                             ExpectedShape(info));
    for (int i = 0; i < t.rank(); ++i) {
      const Dim& d = info.shape[static_cast<size_t>(i)];
      if (d.known() && d.value != t.dim(i))
        return InvalidArgument(name + " has dims " + DimsToString(t.dims()) + ", the model expects " +
                               ExpectedShape(info) + " (axis " + std::to_string(i) + ")");
    }
  }
  if (t.dim(0) == 0) return InvalidArgument(name + " has no rows; a request needs at least one");
  return t.dim(0);
}

// The whole request against the session: every input present, none unknown, one row count.
// Fills *host with the inputs on the host (copied there when on a device); returns the rows.
StatusOr<int64_t> CheckRequest(const Session& session, const std::map<std::string, Tensor>& inputs,
                               std::map<std::string, Tensor>* host) {
  const std::vector<IoInfo>& infos = session.inputs();
  for (const auto& entry : inputs) {
    if (std::none_of(infos.begin(), infos.end(), [&](const IoInfo& i) { return i.name == entry.first; })) {
      std::string known;
      for (const IoInfo& i : infos) known += (known.empty() ? "" : ", ") + Quoted(i.name);
      return InvalidArgument("unknown input " + Quoted(entry.first) + "; the model's inputs are " + known);
    }
  }
  int64_t rows = -1;
  std::string rows_from;
  for (const IoInfo& info : infos) {
    auto it = inputs.find(info.name);
    if (it == inputs.end())
      return InvalidArgument("missing input " + Quoted(info.name) + " (" + ExpectedShape(info) + ")");
    WH_ASSIGN_OR_RETURN(int64_t r, CheckInput(info, it->second));
    if (rows >= 0 && r != rows)
      return InvalidArgument("input " + Quoted(info.name) + " has " + std::to_string(r) + " rows, input " +
                             Quoted(rows_from) + " has " + std::to_string(rows) +
                             ": every input's first axis is the request's batch");
    rows = r;
    rows_from = info.name;
    if (it->second.device() == DeviceType::kCpu) {
      host->emplace(info.name, it->second);
    } else {
      WH_ASSIGN_OR_RETURN(Tensor h, it->second.ToDevice(DeviceType::kCpu));
      host->emplace(info.name, std::move(h));
    }
  }
  if (rows < 0) return InvalidArgument("the model has no inputs to batch");
  return rows;
}

}  // namespace

struct BatchingSession::Impl {
  BatchingOptions options;
  Clock::duration max_delay{};

  mutable std::mutex mu;
  std::condition_variable work_cv;  // workers: a request arrived, or shutting down
  std::shared_ptr<const Session> session;
  std::list<Request*> queue;
  bool stopping = false;
  BatchingStats stats;
  int active_callers = 0;              // threads inside Run()
  std::condition_variable callers_cv;  // Shutdown: the last caller left

  std::mutex join_mu;  // Shutdown joins the workers once, whoever calls it
  std::vector<std::thread> workers;

  void WorkerLoop();
  bool TakeBatch(Clock::time_point now, Batch* batch, Clock::time_point* wake);
  void ExpireQueued(Clock::time_point now);
  void Finish(Batch& batch, Status status, std::vector<std::vector<Tensor>>& outputs);
};

namespace {

// The batch's run: one request runs as it came; several are stacked, run once and split. Fills
// (*outputs)[i] for request i, or returns the error every request of the batch gets.
Status RunBatch(const Batch& batch, std::vector<std::vector<Tensor>>* outputs) {
  const Session& session = *batch.session;
  if (batch.requests.size() == 1) {
    WH_ASSIGN_OR_RETURN((*outputs)[0], session.Run(batch.requests[0]->inputs));
    return Status::Ok();
  }
  const std::string context = "a batch of " + std::to_string(batch.requests.size()) + " requests (" +
                              std::to_string(batch.rows) + " rows)";
  std::map<std::string, Tensor> stacked;
  std::vector<const Tensor*> parts(batch.requests.size());
  for (const auto& entry : batch.requests[0]->inputs) {
    for (size_t i = 0; i < batch.requests.size(); ++i) parts[i] = &batch.requests[i]->inputs.at(entry.first);
    auto t = serving::StackRows(parts);
    if (!t.ok()) return t.status().WithContext(context + ", stacking input " + Quoted(entry.first));
    stacked.emplace(entry.first, std::move(*t));
  }
  auto run = session.Run(stacked);
  if (!run.ok()) return run.status().WithContext(context);
  const std::vector<Tensor>& result = *run;
  for (size_t k = 0; k < result.size(); ++k) {
    const Tensor& t = result[k];
    if (!t.is_tensor() || t.rank() == 0 || t.dim(0) != batch.rows || DTypeSize(t.dtype()) == 0) {
      const std::string name = k < session.outputs().size() ? session.outputs()[k].name : std::to_string(k);
      const std::string what = t.is_tensor() ? std::string(DTypeName(t.dtype())) + " " + DimsToString(t.dims())
                                             : std::string("not a tensor");
      return InvalidArgument(context + ": output " + Quoted(name) + " (" + what +
                             ") does not have the batch's rows on its first axis, so it cannot be split "
                             "between requests; serve this model with max_batch 1");
    }
  }
  int64_t begin = 0;
  for (size_t i = 0; i < batch.requests.size(); ++i) {
    const int64_t rows = batch.requests[i]->rows;
    for (const Tensor& t : result) {
      auto part = serving::CopyRows(t, begin, rows);
      if (!part.ok()) return part.status().WithContext(context + ", splitting the outputs");
      (*outputs)[i].push_back(std::move(*part));
    }
    begin += rows;
  }
  return Status::Ok();
}

}  // namespace

// Under mu: requests whose deadline has passed leave the queue with kDeadlineExceeded (their
// callers may be asleep until then; whoever holds the mutex first expires them).
void BatchingSession::Impl::ExpireQueued(Clock::time_point now) {
  for (auto it = queue.begin(); it != queue.end();) {
    Request* r = *it;
    if (r->deadline > now) {
      ++it;
      continue;
    }
    it = queue.erase(it);
    r->queued = false;
    r->done = true;
    r->status = DeadlineExceeded("BatchingSession: the request's deadline passed while it was queued; it did not run");
    ++stats.expired;
    r->cv.notify_one();
  }
}

// Under mu, by an idle worker. Groups the queue by compatibility, oldest first; a group is ready
// when it is full (its rows reach max_batch, or its next request would pass it), when its oldest
// request has waited max_delay (timeout policy), or when shutting down. Takes the first ready group
// (so the oldest group always goes once its delay is over: no signature starves another) and
// returns true; otherwise sets *wake to when the oldest group's delay ends. Eager policy: the
// oldest group is always ready (the caller is idle), so only it is gathered.
bool BatchingSession::Impl::TakeBatch(Clock::time_point now, Batch* batch, Clock::time_point* wake) {
  struct Group {
    std::vector<Request*> members;
    int64_t rows = 0;
    bool full = false;
  };
  const bool stackable = Stackable(*session);
  std::vector<Group> groups;
  for (Request* r : queue) {
    auto g = std::find_if(groups.begin(), groups.end(),
                          [&](const Group& x) { return stackable && Compatible(*x.members[0], *r); });
    if (g == groups.end()) {
      if (options.eager && !groups.empty()) continue;  // only the oldest group goes
      groups.push_back({{r}, r->rows, !stackable || r->rows >= options.max_batch});
    } else if (!g->full) {
      if (g->rows + r->rows > options.max_batch) {
        g->full = true;
      } else {
        g->members.push_back(r);
        g->rows += r->rows;
        g->full = g->rows >= options.max_batch;
      }
    }
    if (groups[0].full) break;  // the oldest group goes now; no need to look further
  }
  for (Group& g : groups) {
    if (!(g.full || stopping || options.eager || now - g.members[0]->enqueued >= max_delay)) continue;
    for (Request* r : g.members) {
      queue.erase(r->pos);
      r->queued = false;
    }
    batch->requests = std::move(g.members);
    batch->rows = g.rows;
    batch->session = session;
    return true;
  }
  *wake = groups[0].members[0]->enqueued + max_delay;
  return false;
}

// Under mu: hands each request its result and wakes its caller.
void BatchingSession::Impl::Finish(Batch& batch, Status status, std::vector<std::vector<Tensor>>& outputs) {
  ++stats.batches;
  stats.rows += batch.rows;
  ++stats.batch_rows[RowBucket(batch.rows)];
  if (!status.ok()) stats.failed += static_cast<int64_t>(batch.requests.size());
  for (size_t i = 0; i < batch.requests.size(); ++i) {
    Request* r = batch.requests[i];
    r->status = status;
    if (status.ok()) r->outputs = std::move(outputs[i]);
    r->done = true;
    r->cv.notify_one();
  }
}

void BatchingSession::Impl::WorkerLoop() {
  std::unique_lock<std::mutex> lock(mu);
  for (;;) {
    if (queue.empty()) {
      if (stopping) return;
      work_cv.wait(lock);
      continue;
    }
    const Clock::time_point now = Clock::now();
    ExpireQueued(now);
    if (queue.empty()) continue;
    Batch batch;
    Clock::time_point wake;
    if (!TakeBatch(now, &batch, &wake)) {
      work_cv.wait_until(lock, wake);
      continue;
    }
    lock.unlock();
    std::vector<std::vector<Tensor>> outputs(batch.requests.size());
    Status status = RunBatch(batch, &outputs);
    lock.lock();
    Finish(batch, std::move(status), outputs);
    // A worker that finishes may leave the others asleep on a timer while the queue already holds
    // a ready batch; this one loops and looks itself.
  }
}

BatchingSession::BatchingSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

BatchingSession::~BatchingSession() { Shutdown(); }

StatusOr<std::unique_ptr<BatchingSession>> BatchingSession::Make(std::shared_ptr<const Session> session,
                                                                 const BatchingOptions& options) {
  if (!session) return InvalidArgument("BatchingSession: the session is null");
  if (options.max_batch < 1)
    return InvalidArgument("BatchingSession: max_batch must be at least 1, got " + std::to_string(options.max_batch));
  if (!(options.max_delay_ms >= 0))  // NaN too
    return InvalidArgument("BatchingSession: max_delay_ms must be >= 0, got " + std::to_string(options.max_delay_ms));
  if (options.max_queue < 1)
    return InvalidArgument("BatchingSession: max_queue must be at least 1, got " + std::to_string(options.max_queue));
  if (options.workers < 1)
    return InvalidArgument("BatchingSession: workers must be at least 1, got " + std::to_string(options.workers));
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  // Past ~30 years the delay is "forever" (and steady_clock's nanoseconds stay far from overflow).
  const double ms = std::min(options.max_delay_ms, 1e12);
  impl->max_delay = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(ms));
  impl->session = std::move(session);
  impl->stats.batch_rows.assign(kRowBuckets, 0);
  Impl* raw = impl.get();
  std::unique_ptr<BatchingSession> batching(new BatchingSession(std::move(impl)));
  try {
    for (int i = 0; i < options.workers; ++i) raw->workers.emplace_back([raw] { raw->WorkerLoop(); });
  } catch (const std::system_error& e) {
    batching->Shutdown();
    return ResourceExhausted("BatchingSession: could not start worker thread " +
                             std::to_string(raw->workers.size() + 1) + " of " + std::to_string(options.workers) +
                             ": " + e.what());
  }
  return batching;
}

namespace {

// Counts a thread inside Run(), so that Shutdown (and so the destructor) returns only once every
// caller has left and nothing touches the mutex any more.
class CallerScope {
 public:
  CallerScope(std::mutex& mu, int& active, std::condition_variable& left) : mu_(mu), active_(active), left_(left) {
    std::lock_guard<std::mutex> lock(mu_);
    ++active_;
  }
  ~CallerScope() {
    std::lock_guard<std::mutex> lock(mu_);
    if (--active_ == 0) left_.notify_all();
  }
  CallerScope(const CallerScope&) = delete;
  CallerScope& operator=(const CallerScope&) = delete;

 private:
  std::mutex& mu_;
  int& active_;
  std::condition_variable& left_;
};

}  // namespace

StatusOr<std::vector<Tensor>> BatchingSession::Run(const std::map<std::string, Tensor>& inputs,
                                                   Clock::time_point deadline) {
  Impl& im = *impl_;
  const CallerScope caller(im.mu, im.active_callers, im.callers_cv);
  Request req;
  {
    const std::shared_ptr<const Session> current = session();
    auto rows = CheckRequest(*current, inputs, &req.inputs);
    if (!rows.ok()) {
      std::lock_guard<std::mutex> lock(im.mu);
      ++im.stats.invalid;
      return rows.status().WithContext("BatchingSession");
    }
    req.rows = *rows;
  }
  std::unique_lock<std::mutex> lock(im.mu);
  if (im.stopping) {
    ++im.stats.rejected;
    return ResourceExhausted("BatchingSession: shutting down; the request was refused");
  }
  if (static_cast<int64_t>(im.queue.size()) >= im.options.max_queue) {
    ++im.stats.rejected;
    return ResourceExhausted("BatchingSession: the queue is full (" + std::to_string(im.options.max_queue) +
                             " requests waiting); the request was refused");
  }
  req.enqueued = Clock::now();
  req.deadline = deadline;
  req.pos = im.queue.insert(im.queue.end(), &req);
  req.queued = true;
  ++im.stats.requests;
  im.work_cv.notify_one();
  while (!req.done) {
    if (!req.queued || deadline == Clock::time_point::max()) {
      req.cv.wait(lock);  // taken into a batch: it finishes whatever the deadline
      continue;
    }
    if (req.cv.wait_until(lock, deadline) == std::cv_status::timeout && req.queued) {
      im.queue.erase(req.pos);
      req.queued = false;
      ++im.stats.expired;
      return DeadlineExceeded("BatchingSession: the request's deadline passed while it was queued; it did not run");
    }
  }
  if (!req.status.ok()) return req.status;
  return std::move(req.outputs);
}

Status BatchingSession::Swap(std::shared_ptr<const Session> session) {
  if (!session) return InvalidArgument("BatchingSession: Swap to a null session");
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->session = std::move(session);
  return Status::Ok();
}

void BatchingSession::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->work_cv.notify_all();
  std::lock_guard<std::mutex> join(impl_->join_mu);
  for (std::thread& t : impl_->workers)
    if (t.joinable()) t.join();
  // The drained requests' callers are waking up; wait until they have left Run().
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->callers_cv.wait(lock, [&] { return impl_->active_callers == 0; });
}

std::shared_ptr<const Session> BatchingSession::session() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->session;
}

BatchingStats BatchingSession::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  BatchingStats s = impl_->stats;
  s.queue_depth = static_cast<int64_t>(impl_->queue.size());
  return s;
}

const BatchingOptions& BatchingSession::options() const { return impl_->options; }

}  // namespace whittle
