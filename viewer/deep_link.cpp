// Deep links (deep_link.h): a moment of the narration as a URL's query, parsed and written.
#include "viewer/deep_link.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace dpscope::view {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int link_integer(const std::string& key, const std::string& value, int lowest) {
  size_t used = 0;
  long parsed = 0;
  try {
    parsed = std::stol(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || value.empty() || parsed < lowest || parsed > 1'000'000'000) {
    throw std::invalid_argument("the link's " + key + "=" + value + " is not a whole number from " +
                                std::to_string(lowest) + "; give one, as " + key + "=" + std::to_string(lowest));
  }
  return static_cast<int>(parsed);
}

}  // namespace

std::string percent_encoded(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out += c;
    } else {
      char escaped[4];
      std::snprintf(escaped, sizeof escaped, "%%%02X", u);
      out += escaped;
    }
  }
  return out;
}

std::string percent_decoded(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      out += ' ';
      continue;
    }
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    const int high = i + 1 < text.size() ? hex_value(text[i + 1]) : -1;
    const int low = i + 2 < text.size() ? hex_value(text[i + 2]) : -1;
    if (high < 0 || low < 0) {
      throw std::invalid_argument("'" + std::string(text) + "' has a '%' without two hex digits after it; "
                                  "write a '%' as %25");
    }
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return out;
}

DeepLink parse_deep_link(std::string_view query) {
  if (!query.empty() && query.front() == '?') query.remove_prefix(1);
  DeepLink link;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    const std::string key = percent_decoded(pair.substr(0, eq));
    const std::string value = eq == std::string_view::npos ? "" : percent_decoded(pair.substr(eq + 1));
    if (key == "trace") {
      link.trace = value;
    } else if (key == "compare") {
      link.compare = value;
    } else if (key == "iter") {
      link.iteration = link_integer(key, value, 0);
    } else if (key == "step") {
      link.step = link_integer(key, value, 0);
    } else if (key == "rank") {
      link.rank = link_integer(key, value, 0);
    } else if (key == "clock") {
      link.clock = analysis::parse_clock(value);
      if (!link.clock) {
        throw std::invalid_argument("the link's clock=" + value + " is not a clock; give clock=" +
                                    std::string(analysis::to_string(analysis::Clock::Measured)) + " or clock=" +
                                    std::string(analysis::to_string(analysis::Clock::Cluster)));
      }
    } else if (key == "scale") {
      char* end = nullptr;
      const float scale = std::strtof(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !(scale >= 1 && scale <= 3)) {
        throw std::invalid_argument("the link's scale=" + value + " is not a presenter size from 1 to 3; give scale=2, say");
      }
      link.scale = scale;
    } else if (key == "theme") {
      link.theme = value;
    }
  }
  if (link.step && !link.iteration) {
    throw std::invalid_argument("the link gives step=" + std::to_string(*link.step) +
                                " without iter=; give the iteration too, as iter=3&step=" + std::to_string(*link.step));
  }
  return link;
}

std::string deep_link_query(const DeepLink& link) {
  std::string out;
  const auto add = [&out](const char* key, const std::string& value) {
    out += (out.empty() ? "" : "&") + std::string(key) + "=" + percent_encoded(value);
  };
  if (!link.trace.empty()) add("trace", link.trace);
  if (!link.compare.empty()) add("compare", link.compare);
  if (link.iteration) add("iter", std::to_string(*link.iteration));
  if (link.step) add("step", std::to_string(*link.step));
  if (link.rank) add("rank", std::to_string(*link.rank));
  if (link.clock) add("clock", std::string(analysis::to_string(*link.clock)));
  if (link.scale) {
    char scale[16];
    std::snprintf(scale, sizeof scale, "%g", double(*link.scale));
    add("scale", scale);
  }
  if (!link.theme.empty()) add("theme", link.theme);
  return out;
}

}  // namespace dpscope::view
