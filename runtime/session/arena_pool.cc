#include "runtime/session/arena_pool.h"

namespace whittle {

std::unique_ptr<RunArena> ArenaPool::Take() const {
  std::unique_ptr<RunArena> arena;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      arena = std::move(idle_.back());
      idle_.pop_back();
    }
  }
  if (!arena) arena = std::make_unique<RunArena>();
  arena->allocated = arena->reused = 0;
  arena->meter = meter;
  return arena;
}

void ArenaPool::Give(std::unique_ptr<RunArena> arena) const {
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(std::move(arena));
}

void ArenaPool::Recycle(std::unique_ptr<RunArena> arena, const DeviceRuntime* rt) const {
  if (arena->queued) {  // its uploads must land before another thread's run may reuse the buffers
    (void)rt->synchronize();
    arena->queued = false;
  }
  for (Tensor& t : arena->slots) t = Tensor();
  for (Tensor& t : arena->moved) arena->Release(t);
  Give(std::move(arena));
}

}  // namespace whittle
