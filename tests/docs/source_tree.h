// Reading the source tree for the checks of tests/docs: the project's own text files (not build
// trees, traces or the fuzzers' corpus), its top-level folders, and the small helpers the checks
// share for reporting and for writing scratch trees.
#pragma once

#include <algorithm>
#include <sstream>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

namespace dpscope::docs_test {

namespace fs = std::filesystem;

struct TextFile {
  std::string path;  // relative to the root, with '/'
  std::string text;
};

// What is not the project's own text: build trees, git's store, traces, the fuzzers' corpus
// (machine-made inputs that may hold any text) and npm's installs (tests/web's node_modules).
inline bool skipped_dir(const fs::path& relative) {
  const std::string name = relative.filename().string();
  if (name == ".git" || name == "traces" || name == "node_modules") return true;
  if (name.rfind("build", 0) == 0 && !relative.has_parent_path()) return true;
  return relative.generic_string() == "tests/fuzz/corpus";
}

// The whole content of a file ("" when it cannot be read).
inline std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Every text file under `root` (a file with a NUL byte in its first 8 KiB is binary). Errors are
// skipped, not thrown: someone may be editing the tree while the test reads it.
inline std::vector<TextFile> text_files(const fs::path& root) {
  std::vector<TextFile> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    const fs::path relative = fs::relative(it->path(), root, ec);
    if (ec) break;
    if (it->is_directory(ec)) {
      if (skipped_dir(relative)) it.disable_recursion_pending();
      continue;
    }
    const auto size = it->file_size(ec);
    if (ec || !it->is_regular_file(ec) || size > (uintmax_t{4} << 20)) {
      ec.clear();
      continue;
    }
    std::string text = read_text(it->path());
    if (text.find('\0') < 8192) continue;
    files.push_back({relative.generic_string(), std::move(text)});
  }
  std::sort(files.begin(), files.end(),
            [](const TextFile& a, const TextFile& b) { return a.path < b.path; });
  return files;
}

// The repository's top-level folders: every folder at the root but build trees, traces/ and
// hidden ones (what .gitignore leaves), sorted.
inline std::vector<std::string> top_level_folders(const fs::path& root) {
  std::vector<std::string> folders;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory(ec) || name.empty() || name[0] == '.') continue;
    if (skipped_dir(fs::path(name))) continue;
    folders.push_back(name);
  }
  std::sort(folders.begin(), folders.end());
  return folders;
}

inline std::string joined(const std::vector<std::string>& problems) {
  std::string out;
  for (const std::string& p : problems) out += "\n  " + p;
  return out;
}

// Writes a file of a scratch tree, making its folders.
inline void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// String and list helpers the checks share.
inline bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}
inline bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
inline bool contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

inline std::string at(const std::string& file, size_t index) {
  return file + ":" + std::to_string(index + 1);
}


inline bool is_source(const fs::path& path) {
  return path.extension() == ".h" || path.extension() == ".cpp";
}

// The .h and .cpp files under root/folder, by their path relative to the folder, sorted.
inline std::vector<std::string> sources_in(const fs::path& root, const std::string& folder) {
  std::vector<std::string> files;
  std::error_code ec;
  const fs::path base = root / folder;
  for (auto it = fs::recursive_directory_iterator(base, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (it->is_regular_file(ec) && is_source(it->path())) {
      files.push_back(fs::relative(it->path(), base, ec).generic_string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}


// Whether some problem mentions `text` (the scratch-tree checks).
inline bool has(const std::vector<std::string>& problems, const std::string& text) {
  return std::any_of(problems.begin(), problems.end(),
                     [&](const std::string& p) { return p.find(text) != std::string::npos; });
}

}  // namespace dpscope::docs_test
