#include "ops/rope/rope.h"

#include <cmath>
#include <vector>

#include "core/parallel.h"

namespace dg {

void rope_cpu(float* x, int64_t rows, int64_t heads, int64_t head_dim, const int64_t* pos, const float* inv_freq,
              Storage act) {
  const int64_t half = head_dim / 2;
  parallel_for(rows, 16, [&](int64_t r0, int64_t r1) {
    std::vector<float> c(static_cast<size_t>(half)), s(static_cast<size_t>(half));
    for (int64_t r = r0; r < r1; ++r) {
      const float p = static_cast<float>(pos[r]);
      for (int64_t i = 0; i < half; ++i) {
        const float ang = p * inv_freq[i];
        c[static_cast<size_t>(i)] = round_to(act, std::cos(ang));
        s[static_cast<size_t>(i)] = round_to(act, std::sin(ang));
      }
      for (int64_t h = 0; h < heads; ++h) {
        float* v = x + (r * heads + h) * head_dim;
        for (int64_t i = 0; i < half; ++i) {
          const float a = v[i], b = v[i + half];
          const float ci = c[static_cast<size_t>(i)], si = s[static_cast<size_t>(i)];
          v[i] = round_to(act, round_to(act, a * ci) + round_to(act, -b * si));
          v[i + half] = round_to(act, round_to(act, b * ci) + round_to(act, a * si));
        }
      }
    }
  });
}

}  // namespace dg
