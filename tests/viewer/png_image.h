// A PNG the viewer wrote (--screenshot) read back as an Image (image_checks.h) for the tests to
// look at what was drawn; stb_image, Dear ImGui's package's, decodes it.
#pragma once

#include <stb_image.h>

#include <string>

#include "tests/viewer/image_checks.h"

namespace dpscope::testing {

// `path`'s pixels as RGB; an empty Image (width 0) when it cannot be read.
inline Image load_png(const std::string& path) {
  Image image;
  int channels = 0;
  unsigned char* data = stbi_load(path.c_str(), &image.width, &image.height, &channels, 3);
  if (!data) return Image{};
  image.rgb.assign(data, data + size_t(image.width) * size_t(image.height) * 3);
  stbi_image_free(data);
  return image;
}

}  // namespace dpscope::testing
