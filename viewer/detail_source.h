// DetailSource: the full rows behind a loaded Model's spans, read from its file on demand for the
// tooltip, Details, the buckets panel and the step-through (the Model keeps only what drawing
// needs, Note [Span fields]).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "trace/reader.h"
#include "viewer/analysis.h"
#include "viewer/model.h"

namespace dpscope::view {

// One indexed query per answer, cached. Thread-safety: owns a trace::Reader, so one thread only
// (the viewer's UI thread).
class DetailSource {
 public:
  explicit DetailSource(const std::string& path);
  // Every column of the event behind `ref`, looked up by the span's place (Note [Span to event]):
  // the span's own event also beside others with the same times, kind and seq. nullptr when the
  // file no longer has it (or the span has none: Span::kNoEvent).
  const trace::Event* event(const Model& model, const SpanRef& ref);
  // Every event of lane `lane` of `rank` overlapping [t0, t1], by begin (cached per key).
  // `lane` is the loaded lane (its longest span bounds the query, so no lane is scanned whole).
  const std::vector<trace::Event>& events(int32_t rank, const Lane& lane, int64_t t0, int64_t t1);

 private:
  trace::Reader reader_;
  std::map<std::tuple<int32_t, int32_t, int64_t>, trace::Event> by_ref_;
  std::map<std::tuple<int32_t, int32_t, int64_t, int64_t>, std::vector<trace::Event>> ranges_;
};

}  // namespace dpscope::view
