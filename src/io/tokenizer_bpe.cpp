// The BPE model of the tokenizer: a word becomes one symbol per character (or per byte through the
// "<0xNN>" byte-fallback tokens, or <unk>), then adjacent pairs listed in the merges are merged lowest rank
// first (leftmost on ties) until none applies. Reference: HF tokenizers BPE::merge_word and
// Word::merge_all, including its stale-entry check (a queued merge is applied only while the pair at its
// position still maps to the same new token).
#include <fmt/format.h>

#include <queue>

#include "core/error.h"
#include "io/tokenizer_impl.h"

namespace dg::tok {

void Bpe::build(Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions opt,
                const std::string& where) {
  vocab_ = std::move(vocab);
  opt_ = std::move(opt);
  int32_t max_id = -1;
  for (const auto& [token, id] : vocab_) {
    if (id < 0) fail("{}: model vocab id {} of '{}' is negative", where, id, token);
    max_id = std::max(max_id, id);
  }
  id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
  id_present_.assign(static_cast<size_t>(max_id + 1), false);
  for (const auto& [token, id] : vocab_) {
    id_to_token_[static_cast<size_t>(id)] = token;
    id_present_[static_cast<size_t>(id)] = true;
  }
  for (int b = 0; b < 256; ++b) {
    const auto id = id_of(fmt::format("<0x{:02X}>", b));
    byte_ids_[static_cast<size_t>(b)] = id.value_or(-1);
  }
  const size_t prefix_len = opt_.continuing_subword_prefix.size();
  merges_.clear();
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const auto a_id = id_of(a);
    if (!a_id) fail("{}: merge {} names '{}', which is not in the model vocab", where, rank, a);
    const auto b_id = id_of(b);
    if (!b_id) fail("{}: merge {} names '{}', which is not in the model vocab", where, rank, b);
    if (b.size() < prefix_len) fail("{}: merge {} right side '{}' is shorter than the subword prefix", where, rank, b);
    const std::string merged = a + b.substr(prefix_len);
    const auto new_id = id_of(merged);
    if (!new_id) fail("{}: merge {} makes '{}', which is not in the model vocab", where, rank, merged);
    merges_[pair_key(*a_id, *b_id)] = {static_cast<uint32_t>(rank), *new_id};  // a repeated pair: last wins
  }
}

std::optional<int32_t> Bpe::id_of(std::string_view token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* Bpe::token_of(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || !id_present_[static_cast<size_t>(id)]) {
    return nullptr;
  }
  return &id_to_token_[static_cast<size_t>(id)];
}

namespace {

struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  uint32_t len;  // bytes covered; 0 once merged into its left neighbour
};

struct QueuedMerge {
  uint32_t rank;
  uint32_t pos;
  int32_t new_id;
};

struct LaterMerge {  // priority_queue puts the "largest" on top: make that the lowest (rank, pos)
  bool operator()(const QueuedMerge& a, const QueuedMerge& b) const {
    if (a.rank != b.rank) return a.rank > b.rank;
    return a.pos > b.pos;
  }
};

void add_symbol(std::vector<Symbol>& syms, int32_t id, uint32_t len) {
  const auto n = static_cast<int32_t>(syms.size());
  if (n > 0) syms.back().next = n;
  syms.push_back({id, n - 1, -1, len});
}

}  // namespace

void Bpe::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (opt_.ignore_merges) {
    if (const auto id = id_of(word)) {
      out.push_back(*id);
      return;
    }
  }
  std::vector<Symbol> syms;
  syms.reserve(word.size());
  int32_t unk_id = -1;  // pending <unk> (-1: none) and the bytes it covers
  uint32_t unk_len = 0;
  std::string key;
  for (size_t i = 0; i < word.size();) {
    const size_t len = utf8_char_len(static_cast<uint8_t>(word[i]));
    const std::string_view ch = word.substr(i, len);
    const bool first = i == 0;
    i += len;
    const bool last = i >= word.size();
    key.clear();
    if (!first) key += opt_.continuing_subword_prefix;
    key += ch;
    if (last) key += opt_.end_of_word_suffix;
    if (const auto id = id_of(key)) {
      if (unk_id >= 0) {
        add_symbol(syms, unk_id, unk_len);
        unk_id = -1;
      }
      add_symbol(syms, *id, static_cast<uint32_t>(len));
      continue;
    }
    if (opt_.byte_fallback) {
      bool all_bytes = true;
      for (const char c : key) all_bytes = all_bytes && byte_ids_[static_cast<uint8_t>(c)] >= 0;
      if (all_bytes) {
        // As in HF, a pending <unk> is not flushed here: it lands after these bytes.
        for (const char c : key) add_symbol(syms, byte_ids_[static_cast<uint8_t>(c)], 1);
        continue;
      }
    }
    if (!opt_.unk_token) continue;  // no unk token: the character is dropped
    const auto unk = id_of(*opt_.unk_token);
    if (!unk) fail("tokenizer: unk token '{}' is not in the model vocab", *opt_.unk_token);
    if (unk_id >= 0 && opt_.fuse_unk) {
      unk_len += static_cast<uint32_t>(len);
    } else {
      if (unk_id >= 0) add_symbol(syms, unk_id, unk_len);
      unk_id = *unk;
      unk_len = static_cast<uint32_t>(len);
    }
  }
  if (unk_id >= 0) add_symbol(syms, unk_id, unk_len);

  std::priority_queue<QueuedMerge, std::vector<QueuedMerge>, LaterMerge> queue;
  const auto lookup = [&](int32_t a, int32_t b) -> const MergeTarget* {
    const auto it = merges_.find(pair_key(a, b));
    return it == merges_.end() ? nullptr : &it->second;
  };
  for (size_t p = 0; p + 1 < syms.size(); ++p) {
    if (const auto* m = lookup(syms[p].id, syms[p + 1].id)) {
      queue.push({m->rank, static_cast<uint32_t>(p), m->new_id});
    }
  }
  while (!queue.empty()) {
    const QueuedMerge top = queue.top();
    queue.pop();
    Symbol& cur = syms[top.pos];
    if (cur.len == 0 || cur.next == -1) continue;
    const Symbol right = syms[static_cast<size_t>(cur.next)];
    const auto* target = lookup(cur.id, right.id);
    if (target == nullptr || target->new_id != top.new_id) continue;  // stale entry
    syms[static_cast<size_t>(cur.next)].len = 0;
    cur.id = top.new_id;
    cur.len += right.len;
    cur.next = right.next;
    if (right.next >= 0) syms[static_cast<size_t>(right.next)].prev = static_cast<int32_t>(top.pos);
    if (cur.prev >= 0) {
      if (const auto* m = lookup(syms[static_cast<size_t>(cur.prev)].id, cur.id)) {
        queue.push({m->rank, static_cast<uint32_t>(cur.prev), m->new_id});
      }
    }
    if (cur.next >= 0) {
      if (const auto* m = lookup(cur.id, syms[static_cast<size_t>(cur.next)].id)) {
        queue.push({m->rank, top.pos, m->new_id});
      }
    }
  }
  for (const auto& s : syms) {
    if (s.len != 0) out.push_back(s.id);
  }
}

}  // namespace dg::tok
