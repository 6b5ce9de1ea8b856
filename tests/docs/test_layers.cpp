// The house's rule (d), read from the source tree (DPSCOPE_SOURCE_DIR): includes run down the
// layers, never up, between folders (docs/architecture.md's tables) and within trace/. HouseDocs
// runs the check on the repository, HouseDocsChecks on a scratch tree with an include up a layer.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/docs/source_tree.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using dpscope::testing::TempDir;
using namespace dpscope::docs_test;

namespace {

const fs::path kLayersRoot = DPSCOPE_SOURCE_DIR;

// ---- (d) Includes run down the layers
//
// The include graph is written once, in docs/architecture.md's two tables: each top-level folder
// (by the first component of a quoted include that is a top-level folder: "trace/reader.h";
// <torch/torch.h> and "imgui.h" are other projects') and each module of engine/ (by the second
// component of an "engine/..." include), with the folders it `may include` and those it
// `includes today`. An include its row does not allow is a problem naming the file, the line and
// the rule; so is a row whose "includes today" is not what the code includes, and a folder or
// module with sources and no row. A header internal to its folder is included only from there:
// trace/sqlite_db.h (only trace/ writes SQL).
const char* const kArchitecture = "docs/architecture.md";
const char* const kFolderTable = "| folder | may include | includes today |";
const char* const kModuleTable = "| module | may include | includes today |";

struct IncludeRule {
  std::string folder;
  std::vector<std::string> may_include;
  std::vector<std::string> today;
  size_t line = 0;     // of its row in docs/architecture.md
  bool any = false;    // "every module"
};

struct InternalHeader {
  std::string owner;  // a folder ending in '/'
  std::string header;
};
const std::vector<InternalHeader> kInternalHeaders = {
    {"trace/", "trace/sqlite_db.h"},
};

// The `name/` words of one table cell, without the slash, in order.
std::vector<std::string> folders_in_cell(const std::string& cell) {
  std::vector<std::string> folders;
  static const std::regex folder("`([a-z0-9_]+)/`");
  for (auto it = std::sregex_iterator(cell.begin(), cell.end(), folder); it != std::sregex_iterator();
       ++it) {
    folders.push_back((*it)[1]);
  }
  return folders;
}

// The rows of the table whose header line is `header`.
std::vector<IncludeRule> include_rules(const std::vector<std::string>& lines, const std::string& header) {
  std::vector<IncludeRule> rules;
  size_t i = 0;
  while (i < lines.size() && lines[i] != header) ++i;
  for (i += 2; i < lines.size() && starts_with(lines[i], "|"); ++i) {
    std::vector<std::string> cells;
    std::stringstream row(lines[i].substr(1));
    for (std::string cell; std::getline(row, cell, '|');) cells.push_back(cell);
    const std::vector<std::string> folder = cells.empty() ? std::vector<std::string>{} : folders_in_cell(cells[0]);
    if (cells.size() < 3 || folder.size() != 1) continue;
    rules.push_back({folder[0], folders_in_cell(cells[1]), folders_in_cell(cells[2]), i,
                     cells[1].find("every module") != std::string::npos});
  }
  return rules;
}

std::string list_text(const std::vector<std::string>& folders) {
  std::string out;
  for (const std::string& f : folders) out += (out.empty() ? "" : ", ") + f + "/";
  return out;
}

// A rule's "includes today" against what its files include.
void check_today(const IncludeRule& rule, const std::set<std::string>& seen,
                 std::vector<std::string>* problems) {
  const std::set<std::string> written(rule.today.begin(), rule.today.end());
  if (written == seen) return;
  problems->push_back(at(kArchitecture, rule.line) + ": `" + rule.folder + "/` includes today " +
                      list_text(std::vector<std::string>(seen.begin(), seen.end())) +
                      ", the table says " + list_text(rule.today) +
                      ": write what the code includes (or change the code)");
}

// Within trace/, the store's layers, lowest first. A file may include the files of its own layer
// and of the layers below it, never one above:
//   base         schema, records, error, clock, saturate, vocabulary, collective_state
//   sqlite_db    on base
//   writer       on sqlite_db
//   flush_guard  on writer (it closes a FlushTarget; the recorder is one)
//   recorder     on flush_guard
//   page_scan    on base (the SQLite file format read without SQLite, Note [Reading pages])
//   reader       on sqlite_db and page_scan
//   merge        on reader and writer
// that is base < sqlite_db < writer < flush_guard < recorder, and sqlite_db, page_scan < reader
// < merge. A
// file of trace/ in no layer fails too: a new file gets its place here.
struct TraceLayer {
  std::string name;
  std::vector<std::string> stems;
  std::vector<std::string> on;  // the layers right below it
};
const std::vector<TraceLayer> kTraceLayers = {
    {"base", {"schema", "records", "error", "clock", "saturate", "vocabulary", "collective_state"}, {}},
    {"sqlite_db", {"sqlite_db"}, {"base"}},
    {"writer", {"writer"}, {"sqlite_db"}},
    {"flush_guard", {"flush_guard"}, {"writer"}},
    {"recorder", {"recorder"}, {"flush_guard"}},
    {"page_scan", {"page_scan"}, {"base"}},
    {"reader", {"reader"}, {"sqlite_db", "page_scan"}},
    {"merge", {"merge"}, {"reader", "writer"}},
};
const char* const kTraceOrder =
    "base (schema, records, error, clock, saturate, vocabulary, collective_state) < sqlite_db < writer < "
    "flush_guard < recorder; sqlite_db, page_scan < reader < merge; writer < merge";

const TraceLayer* trace_layer_of(const std::string& stem) {
  for (const TraceLayer& layer : kTraceLayers) {
    if (contains(layer.stems, stem)) return &layer;
  }
  return nullptr;
}

// The layers a layer may include: itself and every layer below it.
std::set<std::string> reachable(const TraceLayer& layer) {
  std::set<std::string> seen{layer.name};
  std::vector<std::string> todo = layer.on;
  while (!todo.empty()) {
    const std::string name = todo.back();
    todo.pop_back();
    if (!seen.insert(name).second) continue;
    for (const TraceLayer& l : kTraceLayers) {
      if (l.name == name) todo.insert(todo.end(), l.on.begin(), l.on.end());
    }
  }
  return seen;
}

std::string stem_of(const std::string& path) { return fs::path(path).stem().string(); }

// A trace/ file's include of another trace/ file, against the layers.
void check_trace_layer(const std::string& file, size_t line, const std::string& header,
                       std::vector<std::string>* problems) {
  const TraceLayer* from = trace_layer_of(stem_of(file));
  const TraceLayer* to = trace_layer_of(stem_of(header));
  if (from == nullptr || to == nullptr) return;  // reported once per file
  if (reachable(*from).count(to->name)) return;
  problems->push_back(at(file, line) + " includes " + header + ": layer " + from->name +
                      " may not include layer " + to->name + " above it (trace/'s layers: " +
                      kTraceOrder + ")");
}

// The quoted includes of `file` (relative to `root`) as {line index, header}.
std::vector<std::pair<size_t, std::string>> quoted_includes(const fs::path& root, const std::string& file) {
  static const std::regex include(R"(^\s*#\s*include\s*"([^"]+)\")");
  std::vector<std::pair<size_t, std::string>> includes;
  const std::vector<std::string> lines = lines_of(read_text(root / file));
  for (size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    if (std::regex_search(lines[i], m, include)) includes.emplace_back(i, m[1]);
  }
  return includes;
}

// The folders' rules (docs/architecture.md's first table) on every top-level folder's includes.
void check_folders(const fs::path& root, const std::vector<IncludeRule>& rules,
                   std::vector<std::string>* problems) {
  std::vector<std::string> folders = top_level_folders(root);
  for (const IncludeRule& rule : rules) folders.push_back(rule.folder);
  for (const IncludeRule& rule : rules) {
    std::set<std::string> seen;
    for (const std::string& relative : sources_in(root, rule.folder)) {
      const std::string file = rule.folder + "/" + relative;
      if (rule.folder == "trace" && trace_layer_of(stem_of(file)) == nullptr) {
        problems->push_back(file + " is in none of trace/'s layers (" + kTraceOrder +
                            "): give it its place in tests/docs/test_layers.cpp");
      }
      for (const auto& [i, header] : quoted_includes(root, file)) {
        const std::string top = header.substr(0, header.find('/'));
        if (top == header || !contains(folders, top)) continue;
        seen.insert(top);
        const auto internal = std::find_if(kInternalHeaders.begin(), kInternalHeaders.end(),
                                           [&](const InternalHeader& h) { return h.header == header; });
        if (internal != kInternalHeaders.end() && !starts_with(file, internal->owner)) {
          problems->push_back(at(file, i) + " includes " + header + ", which is internal to " +
                              internal->owner + " (docs/design.md, Rules of the house)");
        } else if (!contains(rule.may_include, top)) {
          problems->push_back(at(file, i) + " includes " + header + ": " + rule.folder +
                              "/ may include " + list_text(rule.may_include) + " only (" +
                              kArchitecture + ")");
        } else if (rule.folder == "trace") {
          check_trace_layer(file, i, header, problems);
        }
      }
    }
    check_today(rule, seen, problems);
  }
}

// The modules' rules (docs/architecture.md's second table) on engine/'s includes of engine/.
void check_engine_modules(const fs::path& root, const std::vector<IncludeRule>& rules,
                          std::vector<std::string>* problems) {
  std::map<std::string, std::set<std::string>> seen;
  for (const std::string& relative : sources_in(root, "engine")) {
    const size_t slash = relative.find('/');
    if (slash == std::string::npos) continue;  // engine/precompiled.h: LibTorch's headers only
    const std::string module = relative.substr(0, slash);
    const auto rule = std::find_if(rules.begin(), rules.end(),
                                   [&](const IncludeRule& r) { return r.folder == module; });
    if (rule == rules.end()) {
      problems->push_back("engine/" + relative + ": module " + module + "/ has no row in " +
                          kArchitecture + "'s table of engine/'s modules: give it one");
      continue;
    }
    for (const auto& [i, header] : quoted_includes(root, "engine/" + relative)) {
      if (!starts_with(header, "engine/")) continue;
      const std::string rest = header.substr(7);
      if (rest.find('/') == std::string::npos) continue;
      const std::string to = rest.substr(0, rest.find('/'));
      seen[module].insert(to);
      if (rule->any || contains(rule->may_include, to)) continue;
      problems->push_back(at("engine/" + relative, i) + " includes " + header + ": engine/" +
                          module + "/ may include " + list_text(rule->may_include) +
                          " only (" + kArchitecture + ", engine/'s modules)");
    }
  }
  for (const IncludeRule& rule : rules) check_today(rule, seen[rule.folder], problems);
}

std::vector<std::string> include_problems(const fs::path& root) {
  const std::vector<std::string> doc = lines_of(read_text(root / kArchitecture));
  const std::vector<IncludeRule> folders = include_rules(doc, kFolderTable);
  const std::vector<IncludeRule> modules = include_rules(doc, kModuleTable);
  std::vector<std::string> problems;
  if (folders.empty() || modules.empty()) {
    problems.push_back(std::string(kArchitecture) + ": the tables of who may include whom (\"" +
                       kFolderTable + "\" and \"" + kModuleTable + "\") were not found");
    return problems;
  }
  check_folders(root, folders, &problems);
  check_engine_modules(root, modules, &problems);
  return problems;
}

TEST(HouseDocs, IncludesRunDownTheLayers) {
  const auto problems = include_problems(kLayersRoot);
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

TEST(HouseDocsChecks, AnIncludeUpTheLayersIsNamedWithTheRule) {
  TempDir dir;
  const fs::path root = dir.path();
  write(root / kArchitecture,
        std::string("# Architecture\n\n") + kFolderTable + "\n|---|---|---|\n"
        "| `trace/` | `trace/` | `trace/` |\n"
        "| `core/` | `trace/`, `core/` | `trace/`, `core/` |\n"
        "| `analysis/` | `trace/`, `core/`, `analysis/` | `trace/`, `formats/` |\n"
        "| `engine/` | `trace/`, `core/`, `engine/` | `analysis/`, `core/`, `engine/` |\n"
        "| `viewer/` | `trace/`, `analysis/`, `viewer/` | `engine/` |\n"
        "| `cli/` | `trace/`, `engine/`, `cli/` | `engine/`, `viewer/` |\n"
        "| `formats/` | `trace/`, `formats/` | (none) |\n\n" +
        kModuleTable + "\n|---|---|---|\n"
        "| `comm/` | `comm/` | (none) |\n"
        "| `ddp/` | `comm/`, `ddp/` | `core/` |\n"
        "| `train/` | every module | `comm/` |\n");
  write(root / "trace/writer.h", "#include \"trace/sqlite_db.h\"\n#include \"trace/recorder.h\"\n");
  write(root / "trace/merge.cpp", "#include \"trace/reader.h\"\n#include \"trace/writer.h\"\n");
  write(root / "trace/kineto.cpp", "");
  write(root / "core/bucket_plan.h", "#include \"trace/schema.h\"\n");
  write(root / "analysis/stats.cpp", "#include \"trace/reader.h\"\n#include \"formats/synth.h\"\n");
  write(root / "viewer/app.cpp", "#include <torch/torch.h>\n#include \"imgui.h\"\n"
                                 "  #  include \"engine/ddp/reducer.h\"\n");
  write(root / "engine/ddp/bucket_assignment.h", "#include \"core/bucket_plan.h\"\n"
                                                 "#include \"engine/fsdp2/device_mesh.h\"\n");
  write(root / "engine/comm/world.cpp", "#include \"analysis/stats.h\"\n");
  write(root / "engine/train/trainer.cpp", "#include \"engine/comm/world.h\"\n");
  write(root / "engine/fsdp/wrap_policy.cpp", "#include \"engine/comm/world.h\"\n");
  write(root / "cli/cmd_view.cpp", "#include \"viewer/app.h\"\n#include \"engine/train/trainer.h\"\n");
  write(root / "analysis/memory_peak.cpp", "#include \"trace/sqlite_db.h\"\n");

  const auto problems = include_problems(root);
  const std::string all = joined(problems);
  EXPECT_TRUE(has(problems, "trace/writer.h:2 includes trace/recorder.h: layer writer may not "
                            "include layer recorder above it")) << all;
  EXPECT_TRUE(has(problems, "trace/kineto.cpp is in none of trace/'s layers")) << all;
  EXPECT_TRUE(has(problems, "analysis/stats.cpp:2 includes formats/synth.h: analysis/ may "
                            "include trace/, core/, analysis/ only")) << all;
  EXPECT_TRUE(has(problems, "viewer/app.cpp:3 includes engine/ddp/reducer.h")) << all;
  EXPECT_TRUE(has(problems, "engine/comm/world.cpp:1 includes analysis/stats.h")) << all;
  EXPECT_TRUE(has(problems, "cli/cmd_view.cpp:1 includes viewer/app.h")) << all;
  EXPECT_TRUE(has(problems, "analysis/memory_peak.cpp:1 includes trace/sqlite_db.h, which is "
                            "internal to trace/")) << all;
  EXPECT_TRUE(has(problems, "engine/ddp/bucket_assignment.h:2 includes engine/fsdp2/device_mesh.h: "
                            "engine/ddp/ may include comm/, ddp/ only")) << all;
  EXPECT_TRUE(has(problems, "engine/fsdp/wrap_policy.cpp: module fsdp/ has no row")) << all;
  // Rows whose "includes today" is not what the code includes, each named with its line.
  EXPECT_TRUE(has(problems, "docs/architecture.md:6: `core/` includes today trace/, the table "
                            "says trace/, core/")) << all;
  EXPECT_TRUE(has(problems, "docs/architecture.md:16: `ddp/` includes today fsdp2/, the table "
                            "says core/")) << all;
  EXPECT_EQ(problems.size(), 11u) << all;
}

}  // namespace
