// Decoding: ids -> token strings -> the decoder steps (Replace, ByteFallback, Fuse, Strip) -> text, as HF
// tokenizers' Tokenizer::decode and Decoder::decode_chain do it; and StreamDecoder, which runs the same
// steps incrementally. Until the first Fuse a step sees a list of tokens; after it, one growing text.
#include <algorithm>
#include <utility>

#include "core/error.h"
#include "io/tokenizer_impl.h"

namespace dg::tok {

namespace {

constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// ByteFallback's run rule: the run's bytes as one string when they are valid UTF-8, else one U+FFFD per byte.
void flush_run(std::vector<std::string>& run_tokens, std::vector<std::string>& out) {
  if (run_tokens.empty()) return;
  std::string bytes;
  for (const auto& t : run_tokens) bytes.push_back(static_cast<char>(byte_token_value(t)));
  if (!utf8_invalid_offset(bytes)) {
    out.push_back(std::move(bytes));
  } else {
    for (size_t i = 0; i < run_tokens.size(); ++i) out.emplace_back(kReplacementChar);
  }
  run_tokens.clear();
}

std::string concat_pieces(const std::vector<std::string>& pieces) {
  std::string s;
  for (const auto& p : pieces) s += p;
  return s;
}

// Replace after a Fuse: full matches are final; a tail that could start a match is held back.
void stream_replace(const DecodeStep& step, std::vector<std::string>& held, std::vector<std::string>& pieces,
                    bool finish, std::vector<std::string>& out) {
  std::string buf = held.empty() ? std::string() : std::move(held[0]);
  held.clear();
  for (const auto& p : pieces) buf += p;
  const std::string_view pat = step.pattern;
  std::string done;
  size_t pos = 0;
  for (size_t hit = buf.find(pat); hit != std::string::npos; hit = buf.find(pat, pos)) {
    done.append(buf, pos, hit - pos);
    done.append(step.content);
    pos = hit + pat.size();
  }
  size_t keep = buf.size();
  if (!finish) {
    for (size_t q = std::max(pos, buf.size() < pat.size() ? 0 : buf.size() - pat.size() + 1); q < buf.size(); ++q) {
      if (pat.starts_with(std::string_view(buf).substr(q))) {
        keep = q;
        break;
      }
    }
  }
  done.append(buf, pos, keep - pos);
  if (keep < buf.size()) held.push_back(buf.substr(keep));
  if (!done.empty()) out.push_back(std::move(done));
}

// Strip after a Fuse: up to `start` leading content characters of the whole text are dropped; up to `stop`
// trailing ones are held until more text shows they are not trailing.
void stream_strip(const DecodeStep& step, std::vector<std::string>& held, size_t& stripped, bool& settled,
                  std::vector<std::string>& pieces, bool finish, std::vector<std::string>& out) {
  std::string done;
  for (const auto& p : pieces) {
    for (size_t i = 0; i < p.size();) {
      const size_t len = utf8_char_len(static_cast<uint8_t>(p[i]));
      const std::string_view ch = std::string_view(p).substr(i, len);
      i += len;
      const bool is_content = ch == step.content;
      if (!settled) {
        if (is_content && stripped < step.start) {
          ++stripped;
          continue;
        }
        settled = true;
      }
      if (is_content && step.stop > 0) {
        held.emplace_back(ch);
        if (held.size() > step.stop) {
          done += held.front();
          held.erase(held.begin());
        }
        continue;
      }
      for (const auto& h : held) done += h;
      held.clear();
      done += ch;
    }
  }
  if (finish) held.clear();  // they were trailing
  if (!done.empty()) out.push_back(std::move(done));
}

// ByteFallback after a Fuse: the whole text is one token, a byte token only if it is exactly "<0xNN>".
void stream_fused_byte(std::vector<std::string>& held, bool& settled, std::vector<std::string>& pieces,
                       bool finish, std::vector<std::string>& out) {
  if (settled) {
    for (auto& p : pieces) out.push_back(std::move(p));
    return;
  }
  std::string buf = held.empty() ? std::string() : std::move(held[0]);
  held.clear();
  for (const auto& p : pieces) buf += p;
  if (buf.size() > 6) {
    settled = true;
    out.push_back(std::move(buf));
  } else if (finish) {
    std::vector<std::string> run{buf};
    if (byte_token_value(buf) >= 0) {
      flush_run(run, out);
    } else {
      out.push_back(std::move(buf));
    }
  } else {
    held.push_back(std::move(buf));
  }
}

}  // namespace

int byte_token_value(std::string_view token) {
  // "<0x" + two characters parsed as a base-16 u8 (Rust's from_str_radix, which also takes "+F") + ">".
  if (token.size() != 6 || token.substr(0, 3) != "<0x" || token[5] != '>') return -1;
  const char a = token[3], b = token[4];
  if (a == '+') return hex_digit(b);
  const int hi = hex_digit(a), lo = hex_digit(b);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

std::string replace_all(std::string_view text, std::string_view pattern, std::string_view content) {
  std::string out;
  size_t pos = 0;
  for (size_t hit = text.find(pattern); hit != std::string_view::npos; hit = text.find(pattern, pos)) {
    out.append(text.substr(pos, hit - pos));
    out.append(content);
    pos = hit + pattern.size();
  }
  out.append(text.substr(pos));
  return out;
}

std::string strip_token(std::string_view token, const DecodeStep& step) {
  std::vector<size_t> starts;  // byte offset of each character
  for (size_t i = 0; i < token.size(); i += utf8_char_len(static_cast<uint8_t>(token[i]))) starts.push_back(i);
  const size_t n = starts.size();
  const auto char_at = [&](size_t k) {
    const size_t end = k + 1 < n ? starts[k + 1] : token.size();
    return token.substr(starts[k], end - starts[k]);
  };
  size_t start_cut = 0;
  for (size_t k = 0; k < n && k < step.start && char_at(k) == step.content; ++k) start_cut = k + 1;
  size_t stop_cut = n;
  for (size_t i = 0; i < std::min(step.stop, n - start_cut); ++i) {
    const size_t k = n - i - 1;
    if (char_at(k) != step.content) break;
    stop_cut = k;
  }
  if (stop_cut <= start_cut) return {};
  const size_t b = start_cut < n ? starts[start_cut] : token.size();
  const size_t e = stop_cut < n ? starts[stop_cut] : token.size();
  return std::string(token.substr(b, e - b));
}

std::string decode_tokens(const std::vector<DecodeStep>& steps, std::vector<std::string> tokens) {
  for (const auto& step : steps) {
    switch (step.kind) {
      case DecodeStep::Kind::kReplace:
        for (auto& t : tokens) t = replace_all(t, step.pattern, step.content);
        break;
      case DecodeStep::Kind::kStrip:
        for (auto& t : tokens) t = strip_token(t, step);
        break;
      case DecodeStep::Kind::kFuse:
        tokens = {concat_pieces(tokens)};
        break;
      case DecodeStep::Kind::kByteFallback: {
        std::vector<std::string> out, run;
        for (auto& t : tokens) {
          if (byte_token_value(t) >= 0) {
            run.push_back(std::move(t));
          } else {
            flush_run(run, out);
            out.push_back(std::move(t));
          }
        }
        flush_run(run, out);
        tokens = std::move(out);
        break;
      }
    }
  }
  return concat_pieces(tokens);
}

}  // namespace dg::tok

namespace dg {

using tok::DecodeStep;

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int32_t id : ids) {
    const std::string* s = impl_->token_string(id);
    if (s == nullptr) continue;  // unknown ids are dropped, as in HF
    if (skip_special && impl_->special(id)) continue;
    tokens.push_back(*s);
  }
  if (!impl_->has_decoder) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  return tok::decode_tokens(impl_->decoder, std::move(tokens));
}

std::string Tokenizer::token_bytes(int32_t id) const {
  const std::string* s = impl_->token_string(id);
  if (s == nullptr) return {};
  if (!impl_->has_decoder) return *s;
  std::vector<tok::DecodeStep> steps;
  for (const tok::DecodeStep& st : impl_->decoder) {
    if (st.kind == tok::DecodeStep::Kind::kByteFallback && tok::byte_token_value(*s) >= 0)
      return std::string(1, static_cast<char>(tok::byte_token_value(*s)));
    if (st.kind != tok::DecodeStep::Kind::kStrip) steps.push_back(st);
  }
  return tok::decode_tokens(steps, {*s});
}

StreamDecoder::StreamDecoder(const Tokenizer& tok, bool skip_special)
    : tok_(tok), skip_special_(skip_special), stages_(tok.impl_->decoder.size()) {}

std::string StreamDecoder::push(int32_t id) { return push(std::span<const int32_t>(&id, 1)); }

std::string StreamDecoder::push(std::span<const int32_t> ids) {
  std::vector<std::string> tokens;
  for (const int32_t id : ids) {
    const std::string* s = tok_.impl_->token_string(id);
    if (s == nullptr || (skip_special_ && tok_.impl_->special(id))) continue;
    tokens.push_back(*s);
  }
  if (tokens.empty()) return {};
  return tok::concat_pieces(run(std::move(tokens), false));
}

std::string StreamDecoder::flush() {
  std::string out = tok::concat_pieces(run({}, true));
  stages_.assign(stages_.size(), Stage{});
  n_tokens_ = 0;
  return out;
}

std::vector<std::string> StreamDecoder::run(std::vector<std::string> pieces, bool finish) {
  const auto& impl = *tok_.impl_;
  if (!impl.has_decoder) {
    std::vector<std::string> out;
    for (auto& p : pieces) out.push_back((n_tokens_++ ? " " : "") + p);
    return out;
  }
  bool text_mode = false;  // after a Fuse every piece is a slice of one text
  for (size_t k = 0; k < impl.decoder.size(); ++k) {
    const DecodeStep& step = impl.decoder[k];
    Stage& st = stages_[k];
    std::vector<std::string> out;
    switch (step.kind) {
      case DecodeStep::Kind::kFuse:
        out = std::move(pieces);
        text_mode = true;
        break;
      case DecodeStep::Kind::kReplace:
        if (!text_mode) {
          for (auto& p : pieces) out.push_back(tok::replace_all(p, step.pattern, step.content));
        } else {
          tok::stream_replace(step, st.held, pieces, finish, out);
        }
        break;
      case DecodeStep::Kind::kStrip:
        if (!text_mode) {
          for (auto& p : pieces) out.push_back(tok::strip_token(p, step));
        } else {
          tok::stream_strip(step, st.held, st.seen, st.settled, pieces, finish, out);
        }
        break;
      case DecodeStep::Kind::kByteFallback:
        if (!text_mode) {
          for (auto& p : pieces) {
            if (tok::byte_token_value(p) >= 0) {
              st.held.push_back(std::move(p));
            } else {
              tok::flush_run(st.held, out);
              out.push_back(std::move(p));
            }
          }
          if (finish) tok::flush_run(st.held, out);
        } else {
          tok::stream_fused_byte(st.held, st.settled, pieces, finish, out);
        }
        break;
    }
    pieces = std::move(out);
  }
  return pieces;
}

}  // namespace dg
