// What the viewer tests look for in a picture of the window (a headless screenshot or a window
// read back with xwd): RGB pixels near a colour, the rows and columns that hold them.
#pragma once

#include <algorithm>
#include <array>
#include <cstdlib>
#include <functional>
#include <vector>

namespace dpscope::testing {

struct Image {
  int width = 0, height = 0;
  std::vector<unsigned char> rgb;  // 3 bytes a pixel, rows top to bottom
  const unsigned char* at(int x, int y) const { return rgb.data() + (size_t(y) * size_t(width) + size_t(x)) * 3; }
};

inline bool near(const unsigned char* p, const std::array<int, 3>& rgb) {
  return std::abs(p[0] - rgb[0]) <= 12 && std::abs(p[1] - rgb[1]) <= 12 && std::abs(p[2] - rgb[2]) <= 12;
}

// Pixels within 12 of `rgb` in every channel, in rows [y0, y1).
inline int pixels_near(const Image& image, int y0, int y1, const std::array<int, 3>& rgb) {
  int count = 0;
  for (int y = std::max(0, y0); y < std::min(y1, image.height); ++y) {
    for (int x = 0; x < image.width; ++x) count += near(image.at(x, y), rgb);
  }
  return count;
}

// Rows in [y0, y1) holding at least one pixel near `rgb` (the height of text in that colour).
inline int rows_with(const Image& image, int y0, int y1, const std::array<int, 3>& rgb) {
  int rows = 0;
  for (int y = y0; y < std::min(y1, image.height); ++y) rows += pixels_near(image, y, y + 1, rgb) > 0;
  return rows;
}

// The column holding most pixels that `is` accepts in rows [y0, y1), at least 100 of them (a
// line, not a stray pixel), or -1.
inline int column_where(const Image& image, int y0, int y1, const std::function<bool(const unsigned char*)>& is) {
  int best = -1, best_count = 99;
  for (int x = 0; x < image.width; ++x) {
    int n = 0;
    for (int y = std::max(0, y0); y < std::min(y1, image.height); ++y) n += is(image.at(x, y));
    if (n > best_count) best = x, best_count = n;
  }
  return best;
}

// Whether rows [y0, y1) are the same in both pictures.
inline bool same_rows(const Image& a, const Image& b, int y0, int y1) {
  if (a.width != b.width || a.height != b.height) return false;
  const long begin = long(y0) * a.width * 3, end = long(y1) * a.width * 3;
  return std::equal(a.rgb.begin() + begin, a.rgb.begin() + end, b.rgb.begin() + begin);
}

}  // namespace dpscope::testing
