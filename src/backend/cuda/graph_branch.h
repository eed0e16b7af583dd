// A branch inside a stream capture: a conditional (IF) node whose body runs only on launches where a kernel captured
// before it set its condition (cudaGraphSetConditional), for work whose need only the device knows (the survivor
// self-conditioning's product over the vocabulary, where a row's survivors overflowed their list). Host code.
#pragma once

#include <cuda_runtime.h>

#include <functional>

namespace dg {

// A condition of the graph that stream `s` is capturing into, reset to 0 at every launch: a kernel captured before
// the branch sets it on the launches that take the branch.
cudaGraphConditionalHandle capture_condition(cudaStream_t s);
// Appends to s's capture an IF node on `cond` after everything s captured so far (what s captures next follows it);
// its body is what `body` issues on `branch`, a stream of its own that is not capturing. The body may not allocate
// (no memory nodes in a branch): its buffers come from s's capture before the call.
void capture_if(cudaStream_t s, cudaGraphConditionalHandle cond, cudaStream_t branch,
                const std::function<void()>& body);

}  // namespace dg
