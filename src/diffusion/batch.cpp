#include "diffusion/batch.h"

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "diffusion/generate.h"

namespace dg {

ModelBatchDenoiser::ModelBatchDenoiser(const Model& m, int64_t logit_rows) : m_(m), logit_rows_(logit_rows) {
  DG_CHECK(logit_rows > 0, "the lm_head chunk must be at least 1 row (got {})", logit_rows);
}

int ModelBatchDenoiser::open() {
  tempered_[next_] = Tensor{};
  return next_++;
}

bool ModelBatchDenoiser::graphed(std::span<const BatchItem> items) const {
  if (items.size() != 1 || !m_.graphs() || !m_.backend().can_capture()) return false;
  const BatchItem& it = items[0];
  const auto t = tempered_.find(it.seq);
  return it.step.kind == ScKind::kLogits && !it.keep_rows && t != tempered_.end() && !t->second.empty() &&
         t->second.shape[0] == static_cast<int64_t>(it.step.canvas.size());
}

void ModelBatchDenoiser::denoise_graphed(const BatchItem& it) {
  Backend& be = m_.backend();
  const int64_t n = static_cast<int64_t>(it.step.canvas.size()), V = m_.config().vocab;
  m_.check_ids(it.step.canvas, "canvas");
  if (ids_.empty() || ids_.numel() != n) ids_ = be.ids(it.step.canvas);
  else be.ids_into(it.step.canvas, ids_);
  const int64_t chunk = std::max(logit_rows_, n);
  if (logits_.empty() || logits_.shape[0] < chunk) logits_ = be.alloc_f32(Shape{chunk, V});
  Tensor logits = row_slice(logits_, 0, n);
  Tensor& tempered = tempered_.at(it.seq);
  capture(it, logits, tempered);
  be.launch_captured();
  last_y_ = Tensor{};
  last_rows_.clear();
  be.stage("sampler");
  be.row_stats(logits, it.step.temperature, tempered, it.stats);
  if (!it.step.u.empty()) be.categorical(logits, it.step.temperature, it.step.u, it.drawn);
}

void ModelBatchDenoiser::capture(const BatchItem& it, const Tensor& logits, Tensor& tempered) {
  const ScInput sc{ScKind::kLogits, &tempered, it.step.sparse_cutoff};
  const StepGraphKey key{it.kv, ids_.data, tempered.data, logits.data, it.kv->len(), logits.shape[0],
                         it.step.sparse_cutoff};
  Tensor out = logits;
  graph_.prepare(m_.backend(), key, [&] { m_.denoise_ids(*it.kv, ids_, sc, out); });
}

void ModelBatchDenoiser::capture_ahead(const BatchItem& it, const Tensor& logits, Tensor& tempered) {
  Backend& be = m_.backend();
  if (!m_.graphs() || !m_.early_capture() || !be.can_capture() || it.keep_rows) return;
  const auto n = static_cast<int64_t>(it.step.canvas.size());
  if (ids_.empty() || ids_.numel() != n) ids_ = be.ids(it.step.canvas);  // the contents are refreshed at launch
  capture(it, logits, tempered);
}

void ModelBatchDenoiser::denoise_encoding(std::span<const BatchItem> items, std::span<const EncodeSeq> enc) {
  if (!fuses_encodes()) {
    BatchDenoiser::denoise_encoding(items, enc);
    return;
  }
  step(items, enc);
}

void ModelBatchDenoiser::step(std::span<const BatchItem> items, std::span<const EncodeSeq> enc) {
  DG_CHECK(!items.empty(), "batched denoise: no sequences");
  if (enc.empty() && graphed(items)) {
    denoise_graphed(items[0]);
    return;
  }
  Backend& be = m_.backend();
  const int64_t V = m_.config().vocab;
  std::vector<DenoiseSeq> seqs;
  seqs.reserve(items.size());
  int64_t widest = 0;
  for (const BatchItem& it : items) {
    const auto t = tempered_.find(it.seq);
    DG_CHECK(t != tempered_.end(), "batched denoise: sequence {} is not open", it.seq);
    const int64_t rows = static_cast<int64_t>(it.step.canvas.size());
    widest = std::max(widest, rows);
    const bool sc_logits = it.step.kind == ScKind::kLogits;
    if (sc_logits)
      DG_CHECK(!t->second.empty() && t->second.shape[0] == rows,
               "batched denoise: sequence {} self-conditions without the previous step's logits", it.seq);
    seqs.push_back(DenoiseSeq{it.kv, it.step.canvas,
                              ScInput{it.step.kind, sc_logits ? &t->second : nullptr, it.step.sparse_cutoff}});
  }
  const Tensor y = m_.encode_denoise_batch(enc, seqs);
  last_y_ = Tensor{};
  last_rows_.clear();
  for (int64_t at = 0; const BatchItem& it : items) {
    const auto n = static_cast<int64_t>(it.step.canvas.size());
    if (it.keep_rows) {
      last_y_ = y;
      last_rows_[it.seq] = {at, n};
    }
    at += n;
  }
  const int64_t chunk = std::max(logit_rows_, widest);
  if (logits_.empty() || logits_.shape[0] < chunk) logits_ = be.alloc_f32(Shape{chunk, V});

  // lm_head and the sampler statistics over groups of whole sequences of at most `chunk` rows.
  int64_t row0 = 0;
  for (size_t i = 0; i < items.size();) {
    size_t j = i;
    int64_t rows = 0;
    while (j < items.size() && rows + static_cast<int64_t>(items[j].step.canvas.size()) <= chunk)
      rows += static_cast<int64_t>(items[j++].step.canvas.size());
    Tensor logits = row_slice(logits_, 0, rows);
    // The softcap may be left to the statistics (Backend::lm_head_open), which store the finished logits back only
    // for a sequence that draws from them.
    const OpenLogits open = m_.lm_head_rows_open(row_slice(y, row0, rows), logits);
    be.stage("sampler");
    int64_t at = 0;
    for (; i < j; ++i) {
      const BatchItem& it = items[i];
      const int64_t n = static_cast<int64_t>(it.step.canvas.size());
      Tensor part = row_slice(logits, at, n);
      Tensor& tempered = tempered_[it.seq];
      if (tempered.empty() || tempered.shape[0] != n) tempered = be.alloc_tempered(Shape{n, V});
      if (items.size() == 1 && it.step.kind != ScKind::kLogits) capture_ahead(it, part, tempered);
      be.row_stats_open(part, open, at, it.step.temperature, tempered, it.stats, !it.step.u.empty());
      if (!it.step.u.empty()) be.categorical(part, it.step.temperature, it.step.u, it.drawn);
      at += n;
    }
    row0 += rows;
  }
  be.stage("host");
}

void BatchDenoiser::row_logits(int, int, std::vector<float>&) {
  fail("this batched denoiser keeps no logits rows, which JSON mode needs");
}

void ModelBatchDenoiser::row_logits(int seq, int row, std::vector<float>& out) {
  const auto it = last_rows_.find(seq);
  DG_CHECK(it != last_rows_.end() && row >= 0 && row < it->second.second,
           "batched logits row: sequence {} had no row {} kept from the last denoise step (keep_rows)", seq, row);
  const int64_t V = m_.config().vocab;
  if (row_.empty()) row_ = m_.backend().alloc_f32(Shape{1, V});
  m_.lm_head_rows(row_slice(last_y_, it->second.first + row, 1), row_);
  out.resize(static_cast<size_t>(V));
  m_.backend().copy_to_host(row_, out.data());
}

BatchRunner::BatchRunner(BatchDenoiser& d, BatchOptions opt) : d_(d), opt_(opt) {
  DG_CHECK(opt.max_batch >= 1 && opt.prefill_tokens >= 1, "batch options: max_batch {} and prefill_tokens {} must be >= 1",
           opt.max_batch, opt.prefill_tokens);
}

BatchRunner::~BatchRunner() {
  for (const auto& r : active_) d_.close(r->seq);
}

int BatchRunner::add(KvCache& kv, std::span<const int32_t> prompt, const SamplerOptions& opt,
                     const GenerateEvents* events) {
  DG_CHECK(!prompt.empty() || kv.len() > 0, "generate: empty prompt and empty cache");
  auto r = std::make_unique<Request>();
  r->id = next_id_++;
  r->kv = &kv;
  // Bounded before it joins the batch: a canvas past max_position_embeddings would fail every sequence's step.
  const SamplerOptions bounded =
      within_positions(opt, kv.len() + static_cast<int64_t>(prompt.size()), d_.canvas(), d_.max_positions());
  r->gen = std::make_unique<Generation>(d_.canvas(), d_.vocab(), prompt, bounded, events);
  if (r->gen->constrained())
    r->gen->set_row_logits([this, req = r.get()](int row, std::vector<float>& out) { d_.row_logits(req->seq, row, out); });
  const int id = r->id;
  waiting_.push_back(std::move(r));
  return id;
}

void BatchRunner::admit() {
  while (!waiting_.empty() && static_cast<int>(active_.size()) < opt_.max_batch) {
    waiting_.front()->seq = d_.open();
    active_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
}

void BatchRunner::retire_done() {
  for (auto it = active_.begin(); it != active_.end();) {
    if ((*it)->gen->done()) {
      d_.close((*it)->seq);
      finished_.push_back(Done{(*it)->id, (*it)->gen->take_result()});
      it = active_.erase(it);
    } else {
      ++it;
    }
  }
}

std::vector<PrefillTake> PrefillRotation::pick(std::span<const uint64_t> ids, std::span<const int64_t> waiting,
                                               int64_t budget) {
  DG_CHECK(ids.size() == waiting.size(), "prefill: {} prompts and {} counts", ids.size(), waiting.size());
  std::vector<PrefillTake> out;
  if (ids.empty() || budget <= 0) return out;
  size_t first = 0;
  while (first < ids.size() && ids[first] < next_) ++first;
  if (first == ids.size()) first = 0;  // wrap: the earliest prompt
  const int64_t slack = prefill_round_limit(budget) - budget;
  for (size_t k = 0; k < ids.size() && budget > 0; ++k) {
    const size_t i = (first + k) % ids.size();
    DG_CHECK(waiting[i] > 0 && (i == 0 || ids[i] > ids[i - 1]), "prefill: prompt {} waits for {} tokens", ids[i],
             waiting[i]);
    const int64_t n = waiting[i] - budget <= slack ? waiting[i] : budget;
    out.push_back(PrefillTake{i, n});
    budget -= n;
    next_ = ids[i] + 1;
  }
  return out;
}

int BatchRunner::round() {
  admit();
  // One encoder pass: the committed blocks of running requests (at most a canvas each), and prompt tokens within
  // the round's budget, shared in turns (PrefillRotation); a prompt the budget cuts continues in a later round.
  // With fused commits (BatchDenoiser::fuses_encodes) the blocks wait for the round's denoise forward instead, from
  // copies of their ids (a Generation's pending ids change once it hears they are encoded).
  const bool fuse = d_.fuses_encodes();
  std::vector<EncodeSeq> seqs, blocks;
  std::vector<std::vector<int32_t>> held;
  held.reserve(active_.size());
  std::vector<std::pair<Request*, size_t>> encoding;
  std::vector<Request*> prompts;
  std::vector<uint64_t> ids;
  std::vector<int64_t> waiting;
  for (const auto& r : active_) {
    if (r->gen->phase() != Generation::Phase::kEncode) continue;
    const std::span<const int32_t> pending = r->gen->pending_encode();
    if (r->gen->started() && fuse) {
      blocks.push_back(EncodeSeq{r->kv, held.emplace_back(pending.begin(), pending.end())});
      encoding.emplace_back(r.get(), pending.size());
    } else if (r->gen->started()) {
      seqs.push_back(EncodeSeq{r->kv, pending});
      encoding.emplace_back(r.get(), pending.size());
    } else if (pending.empty()) {
      r->gen->encoded(0);
    } else {
      prompts.push_back(r.get());
      ids.push_back(static_cast<uint64_t>(r->id));
      waiting.push_back(static_cast<int64_t>(pending.size()));
    }
  }
  for (const PrefillTake& t : prefill_.pick(ids, waiting, opt_.prefill_tokens)) {
    Request* r = prompts[t.index];
    seqs.push_back(EncodeSeq{r->kv, r->gen->pending_encode().first(static_cast<size_t>(t.tokens))});
    encoding.emplace_back(r, static_cast<size_t>(t.tokens));
  }
  if (!seqs.empty()) d_.encode_batch(seqs);
  for (const auto& [r, n] : encoding) r->gen->encoded(n);
  std::vector<BatchItem> items;
  for (const auto& r : active_) {
    if (r->gen->phase() != Generation::Phase::kDenoise) continue;
    StepRequest req;
    if (!r->gen->begin_step(req)) continue;  // cancelled: done
    r->stats.resize(req.canvas.size());
    r->drawn.resize(req.u.size());
    items.push_back(BatchItem{r->seq, r->kv, req, r->stats.data(), r->drawn.data(), r->gen->constrained()});
  }
  if (items.empty() && !blocks.empty()) d_.encode_batch(blocks);
  if (!items.empty()) {
    d_.denoise_encoding(items, blocks);
    size_t k = 0;
    for (const auto& r : active_)
      if (k < items.size() && items[k].seq == r->seq) {
        r->gen->end_step(r->stats.data(), r->drawn.data());
        ++k;
      }
  }
  retire_done();
  return static_cast<int>(items.size());
}

std::vector<BatchRunner::Done> BatchRunner::take_finished() { return std::exchange(finished_, {}); }

std::vector<GenerateResult> generate_batch(BatchDenoiser& d, std::span<BatchJob> jobs, BatchOptions opt) {
  BatchRunner runner(d, opt);
  for (BatchJob& j : jobs) runner.add(*j.kv, j.prompt, j.opt, j.events);
  std::vector<GenerateResult> out(jobs.size());
  while (!runner.idle()) {
    runner.round();
    for (BatchRunner::Done& done : runner.take_finished()) out[static_cast<size_t>(done.id)] = std::move(done.result);
  }
  return out;
}

}  // namespace dg
