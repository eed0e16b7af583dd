#include "cli/option_checks.h"

#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "core/cpus.h"
#include "core/error.h"
#include "ops/attention/attention_topk.h"

namespace dg::cli {
namespace {

template <typename T>
bool parse_int(const std::string& s, T& v) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return !s.empty() && ec == std::errc() && end == s.data() + s.size();
}

bool parse_number(const std::string& s, double& v) {
  if (s.empty()) return false;
  char* end = nullptr;
  v = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

// Integers of any width the option takes (a uint64 seed above INT64_MAX too, where no upper bound is asked); "-1"
// never reaches an unsigned.
CLI::Validator int_check(long long lo, const char* desc, long long hi = LLONG_MAX) {
  return CLI::Validator(
      [lo, hi, desc](std::string& s) -> std::string {
        long long v = 0;
        unsigned long long u = 0;
        const bool ok = parse_int(s, v) ? v >= lo && v <= hi : hi == LLONG_MAX && s[0] != '-' && parse_int(s, u);
        return ok ? std::string() : fmt::format("'{}' is not {}", s, desc);
      },
      desc);
}

CLI::Validator number_check(double lo, bool lo_open, double hi, const char* desc) {
  return CLI::Validator(
      [=](std::string& s) -> std::string {
        double v = 0;
        if (!parse_number(s, v) || !std::isfinite(v) || (lo_open ? !(v > lo) : !(v >= lo)) || !(v <= hi))
          return fmt::format("'{}' is not {}", s, desc);
        return {};
      },
      desc);
}

}  // namespace

CLI::Validator positive_int() { return int_check(1, "an integer >= 1"); }
CLI::Validator non_negative_int() { return int_check(0, "an integer >= 0"); }
CLI::Validator port_number() { return int_check(0, "a port number from 0 to 65535", 65535); }
CLI::Validator positive_finite() { return number_check(0, true, HUGE_VAL, "a finite number > 0"); }
CLI::Validator non_negative_finite() { return number_check(0, false, HUGE_VAL, "a finite number >= 0"); }
CLI::Validator unit_interval() { return number_check(0, false, 1, "a number in [0, 1]"); }

CLI::Validator positive_int_list() {
  const char* desc = "a comma-separated list of integers >= 1";
  return CLI::Validator(
      [desc](std::string& s) -> std::string {
        size_t pos = 0, n = 0;
        for (;;) {
          const size_t comma = s.find(',', pos);
          const std::string part = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
          int v = 0;
          if (!parse_int(part, v) || v < 1) return fmt::format("'{}' is not {}", s, desc);
          ++n;
          if (comma == std::string::npos) break;
          pos = comma + 1;
        }
        return n > 0 ? std::string() : fmt::format("'{}' is not {}", s, desc);
      },
      desc);
}

CLI::Validator attention_topk_value() {
  const char* desc = "off, dyn or a number of keys from 1 to 4096";
  return CLI::Validator(
      [desc](std::string& s) -> std::string {
        try {
          attn_topk_from_name(s, "--attention-topk");
        } catch (const Error&) {
          return fmt::format("'{}' is not {}", s, desc);
        }
        return {};
      },
      desc);
}

const char* attention_topk_help() {
  return "full-attention layers keep only each query row's top-k scoring keys, in prefill and denoise alike: off "
         "(dense attention) | dyn (k = clamp(visible keys / 128, 64, 512)) | K (a fixed k, 1..4096); changes "
         "results (docs/ARCHITECTURE.md, \"Top-k attention\")";
}

const char* linear_act_help() {
  return "activations of the linears whose weights are fp8 (a pack's attn, dense or sc class; --profile fp8-all): "
         "auto or fp8 (quantised per row to E4M3: W8A8 tensor-core products) | bf16 (the weights dequantised); "
         "auto and fp8 differ only in that fp8 refuses a model without fp8 linears";
}

const char* vocab_act_help() {
  return "operands of the two products over the vocabulary, the lm_head and the self-conditioning soft embedding: "
         "bf16 | fp8 (E4M3 copies of the tied table made at load, per-row scales, the inputs quantised per row: W8A8 "
         "tensor-core products; changes results; 2 x 738 MB more at 26B-A4B) | fp8-lm-head (the lm_head alone)";
}

CLI::Validator switch_value() {
  const char* desc = "a switch: bare, or true|false, on|off, yes|no, 1|0";
  return CLI::Validator(
      [desc](std::string& s) -> std::string {
        // CLI11 hands a negated switch's value over negated ("--no-x=2" arrives as "-2").
        static const char* const kWords[] = {"true", "false", "on", "off", "yes", "no", "1", "0", "-1"};
        for (const char* w : kWords)
          if (CLI::detail::to_lower(s) == w) return {};
        return fmt::format("'{}' is not {}", s, desc);
      },
      desc);
}

int threads_for(const std::optional<int>& requested) {
  if (!requested) return 0;
  const int usable = usable_cpus();
  if (*requested <= usable) return *requested;
  std::fprintf(stderr, "diffgemma: warning: --threads %d is more than the %d CPU(s) this process may use; using %d\n",
               *requested, usable, usable);
  return usable;
}

}  // namespace dg::cli
