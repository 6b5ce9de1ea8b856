// Deep links: a moment of the narration as a URL's query, `trace=URL&compare=URL&iter=N&step=S&
// rank=R&clock=cluster|measured&scale=2&theme=projector`, as the browser viewer opens it and its
// Copy link (G) writes it (docs/web.md). Parsing and writing only; the App applies a link
// (viewer/web_main.cpp) and reads its own (report.h's deep_link_of).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "analysis/clock_choice.h"

namespace dpscope::view {

// What a link asks for; every field is optional (absent: the viewer's default).
struct DeepLink {
  std::string trace;    // the trace's URL (relative to the page, or absolute)
  std::string compare;  // a second trace's URL, drawn under the first
  std::optional<int> iteration;
  std::optional<int> step;  // needs iteration; from 0, as --step counts
  std::optional<int> rank;  // whose iteration and steps (default 0)
  std::optional<analysis::Clock> clock;
  std::optional<float> scale;  // the presenter's text size, x1 to x3 (times the screen's own)
  std::string theme;           // "" or a theme's name (palette.h's parse_theme checks it)
};

// The link in `query` (with or without its leading '?'; percent-encoded values, '+' a space).
// Unknown keys are ignored, as a page's other parameters may share the URL. Throws
// std::invalid_argument naming the key, the value given and what it may be.
DeepLink parse_deep_link(std::string_view query);

// `link` as a query, without '?': its fields in the order above, values percent-encoded.
std::string deep_link_query(const DeepLink& link);

// `text` percent-encoded for a URL's query value (RFC 3986's unreserved characters and '/' kept).
std::string percent_encoded(std::string_view text);
// `text` with %XX and '+' decoded; throws std::invalid_argument on a '%' not followed by two hex
// digits.
std::string percent_decoded(std::string_view text);

}  // namespace dpscope::view
