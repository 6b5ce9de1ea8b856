// The repository's cross-references hold: every cited note has exactly one definition, the notes
// table of docs/architecture.md lists every defined note where it is defined and nothing else,
// no file points to the design document that lives outside the repository, and a count the docs
// quote from a test file is that file's.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
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

// Spelled in pieces so that this file, which the checks also read, neither defines nor cites a
// note and names no outside document.
const std::string kNote = std::string("No") + "te";
const std::string kOutsideDesign = std::string("DESI") + "GN.md";
const std::string kNotesTable = "docs/architecture.md";

struct Place {
  std::string file;  // relative to the root, with '/'
  int line = 0;
  std::string text() const { return file + ":" + std::to_string(line); }
};

// After a line break inside a citation: the next line's indentation and comment marker.
size_t skip_continuation(const std::string& text, size_t i) {
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  while (i < text.size() && (text[i] == '/' || text[i] == '#' || text[i] == '*')) ++i;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  return i;
}

// Is `line` a definition, and of which note? A definition is a comment line (//, # or *) whose
// whole text is the note's heading, the word Note and the title in square brackets, with the
// note's body on the lines below. A citation that opens a line (nccl_backend.cpp cites its
// streams note's steps so) has more after the title and is no definition; neither is a row of
// the notes table, or prose.
bool definition_of(const std::string& line, std::string* name) {
  size_t i = 0;
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  const size_t marker = i;
  while (i < line.size() && (line[i] == '/' || line[i] == '#' || line[i] == '*')) ++i;
  if (i == marker) return false;
  while (i < line.size() && line[i] == ' ') ++i;
  if (line.compare(i, kNote.size() + 2, kNote + " [") != 0) return false;
  const size_t open = i + kNote.size() + 1;
  const size_t close = line.find(']', open);
  if (close == std::string::npos || close == open + 1) return false;
  if (line.find_first_not_of(" \t\r", close + 1) != std::string::npos) return false;
  *name = line.substr(open + 1, close - open - 1);
  return name->find('[') == std::string::npos;
}

struct Mention {
  std::string name;
  Place place;
  std::string in_file;  // "... in path" after the title: where the citation says it is, or ""
};

struct Notes {
  std::map<std::string, std::vector<Place>> definitions;
  std::vector<Mention> citations;
};

// Reads one citation's title starting at the '[' at `open`; a title broken over lines is joined
// with one space. Returns the index after ']', or npos when this is no title.
size_t read_title(const std::string& text, size_t open, std::string* name) {
  name->clear();
  size_t i = open + 1;
  while (i < text.size() && name->size() <= 100) {
    const char c = text[i];
    if (c == ']') {
      while (!name->empty() && name->back() == ' ') name->pop_back();
      return name->empty() ? std::string::npos : i + 1;
    }
    if (c == '[') return std::string::npos;
    if (c == '\n') {
      i = skip_continuation(text, i + 1);
      if (!name->empty() && name->back() != ' ') name->push_back(' ');
      continue;
    }
    name->push_back(c);
    ++i;
  }
  return std::string::npos;
}

// "in path/file.ext" right after a citation (across a line break too): where it says to look.
std::string cited_file(const std::string& text, size_t after) {
  size_t i = after;
  if (i < text.size() && text[i] == '`') ++i;
  while (i < text.size() && text[i] == ' ') ++i;
  if (text.compare(i, 2, "in") != 0) return "";
  i += 2;
  if (i >= text.size() || (text[i] != ' ' && text[i] != '\n')) return "";
  i = skip_continuation(text, i + 1);
  size_t end = i;
  while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) ||
                               text[end] == '_' || text[end] == '/' || text[end] == '.' ||
                               text[end] == '-')) {
    ++end;
  }
  while (end > i && text[end - 1] == '.') --end;  // a sentence's full stop
  const std::string file = text.substr(i, end - i);
  const size_t dot = file.rfind('.');
  if (dot == std::string::npos) return "";
  const std::string ext = file.substr(dot + 1);
  return (ext == "h" || ext == "cpp" || ext == "md" || ext == "py" || ext == "sh") ? file : "";
}

Notes scan_notes(const std::vector<TextFile>& files) {
  Notes notes;
  for (const TextFile& file : files) {
    const std::string& text = file.text;
    std::vector<size_t> line_starts{0};
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\n') line_starts.push_back(i + 1);
    }
    auto line_of = [&](size_t pos) {
      return static_cast<int>(std::upper_bound(line_starts.begin(), line_starts.end(), pos) -
                              line_starts.begin());
    };
    std::set<size_t> definition_lines;  // start offsets
    for (size_t l = 0; l < line_starts.size(); ++l) {
      const size_t begin = line_starts[l];
      const size_t end = l + 1 < line_starts.size() ? line_starts[l + 1] - 1 : text.size();
      std::string name;
      if (definition_of(text.substr(begin, end - begin), &name)) {
        notes.definitions[name].push_back({file.path, static_cast<int>(l + 1)});
        definition_lines.insert(begin);
      }
    }
    for (size_t at = text.find(kNote); at != std::string::npos; at = text.find(kNote, at + 1)) {
      if (at > 0 && std::isalnum(static_cast<unsigned char>(text[at - 1]))) continue;
      size_t open = at + kNote.size();
      if (open >= text.size() || (text[open] != ' ' && text[open] != '\n')) continue;
      open = skip_continuation(text, open + (text[open] == '\n' ? 1 : 0));
      if (open >= text.size() || text[open] != '[') continue;
      std::string name;
      const size_t after = read_title(text, open, &name);
      if (after == std::string::npos) continue;
      const int line = line_of(at);
      if (definition_lines.count(line_starts[line - 1]) &&
          text.find_first_not_of(" \t/#*", line_starts[line - 1]) == at) {
        continue;  // the definition itself
      }
      notes.citations.push_back({name, {file.path, line}, cited_file(text, after)});
    }
  }
  return notes;
}

std::string places(const std::vector<Place>& list) {
  std::string out;
  for (const Place& p : list) out += (out.empty() ? "" : ", ") + p.text();
  return out;
}

// (a) Every cited note has exactly one definition, and a citation that names the file to look in
// names the defining one.
std::vector<std::string> citation_problems(const Notes& notes) {
  std::vector<std::string> problems;
  for (const auto& [name, defs] : notes.definitions) {
    if (defs.size() > 1) {
      problems.push_back(kNote + " [" + name + "] is defined " + std::to_string(defs.size()) +
                         " times: " + places(defs) + "; keep one and cite it from the others");
    }
  }
  std::map<std::string, std::vector<Place>> undefined;
  for (const Mention& m : notes.citations) {
    auto def = notes.definitions.find(m.name);
    if (def == notes.definitions.end()) {
      undefined[m.name].push_back(m.place);
      continue;
    }
    if (m.in_file.empty()) continue;
    const std::string& where = def->second.front().file;
    const bool matches = where == m.in_file ||
                         (where.size() > m.in_file.size() &&
                          where.compare(where.size() - m.in_file.size(), m.in_file.size(),
                                        m.in_file) == 0 &&
                          where[where.size() - m.in_file.size() - 1] == '/');
    if (!matches) {
      problems.push_back(m.place.text() + " cites " + kNote + " [" + m.name + "] in " +
                         m.in_file + ", but it is defined in " + def->second.front().text());
    }
  }
  for (const auto& [name, cited_at] : undefined) {
    problems.push_back(kNote + " [" + name + "] is cited but defined nowhere (a comment line of " +
                       "its title alone, followed by its text); cited at " + places(cited_at));
  }
  return problems;
}

// (b) The notes table of docs/architecture.md: rows whose cells are the note's heading in
// backticks, the file that defines it, and what it guards.
std::vector<std::string> table_problems(const std::vector<TextFile>& files, const Notes& notes) {
  auto table = std::find_if(files.begin(), files.end(),
                            [](const TextFile& f) { return f.path == kNotesTable; });
  if (table == files.end()) return {kNotesTable + " is missing: it holds the table of notes"};
  std::map<std::string, Place> listed;
  std::map<std::string, std::string> listed_where;
  std::vector<std::string> problems;
  std::istringstream lines(table->text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    const std::string row_start = "| `" + kNote + " [";
    if (line.rfind(row_start, 0) != 0) continue;
    std::string name;
    const size_t after = read_title(line, row_start.size() - 1, &name);
    const size_t cell = line.find('|', after);
    const size_t cell_end = cell == std::string::npos ? cell : line.find('|', cell + 1);
    if (after == std::string::npos || cell_end == std::string::npos) {
      problems.push_back(kNotesTable + ":" + std::to_string(number) +
                         ": a row of the notes table that does not read | `" + kNote +
                         " [title]` | file | what it guards |");
      continue;
    }
    std::string where = line.substr(cell + 1, cell_end - cell - 1);
    where.erase(0, where.find_first_not_of(' '));
    where.erase(where.find_last_not_of(' ') + 1);
    if (listed.count(name)) {
      problems.push_back(kNotesTable + ":" + std::to_string(number) + " lists " + kNote + " [" +
                         name + "] again (first at line " +
                         std::to_string(listed[name].line) + ")");
    }
    listed[name] = {kNotesTable, number};
    listed_where[name] = where;
  }
  for (const auto& [name, defs] : notes.definitions) {
    auto row = listed.find(name);
    if (row == listed.end()) {
      problems.push_back(kNote + " [" + name + "], defined at " + places(defs) +
                         ", is not in the notes table of " + kNotesTable);
    } else if (std::none_of(defs.begin(), defs.end(), [&](const Place& def) {
                 return def.file == listed_where[name];  // (a) reports a second definition
               })) {
      problems.push_back(row->second.text() + " says " + kNote + " [" + name + "] is in " +
                         listed_where[name] + ", but it is defined at " + defs.front().text());
    }
  }
  for (const auto& [name, place] : listed) {
    if (!notes.definitions.count(name)) {
      problems.push_back(place.text() + " lists " + kNote + " [" + name +
                         "], which no file defines");
    }
  }
  return problems;
}

// (c) The repository stands on its own: nothing points to the outside design document.
std::vector<std::string> outside_design_problems(const std::vector<TextFile>& files) {
  std::vector<std::string> problems;
  for (const TextFile& file : files) {
    std::istringstream lines(file.text);
    std::string line;
    for (int number = 1; std::getline(lines, line); ++number) {
      if (line.find(kOutsideDesign) != std::string::npos) {
        problems.push_back(file.path + ":" + std::to_string(number) + " cites " + kOutsideDesign +
                           ", which is not in the repository; cite docs/design.md or the docs/ " +
                           "page that says it");
      }
    }
  }
  return problems;
}

class RepositoryDocs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    files_ = new std::vector<TextFile>(text_files(DPSCOPE_SOURCE_DIR));
    notes_ = new Notes(scan_notes(*files_));
  }
  static void TearDownTestSuite() {
    delete notes_;
    delete files_;
  }
  static std::vector<TextFile>* files_;
  static Notes* notes_;
};
std::vector<TextFile>* RepositoryDocs::files_ = nullptr;
Notes* RepositoryDocs::notes_ = nullptr;

TEST_F(RepositoryDocs, EveryCitedNoteHasExactlyOneDefinition) {
  // A tree with no notes at all would pass everything below vacuously.
  ASSERT_GE(notes_->definitions.size(), 20u) << "the scan found too few notes in "
                                             << DPSCOPE_SOURCE_DIR;
  ASSERT_GE(notes_->citations.size(), 100u);
  const auto problems = citation_problems(*notes_);
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

TEST_F(RepositoryDocs, NotesTableListsEveryNoteWhereItIsDefined) {
  const auto problems = table_problems(*files_, *notes_);
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

TEST_F(RepositoryDocs, NothingCitesTheDesignDocumentOutsideTheRepository) {
  const auto problems = outside_design_problems(*files_);
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

// The checks on a small tree with one violation of each kind: each is found, and its message
// names the note and the files a reader has to open.
std::string title(const std::string& name) { return kNote + " [" + name + "]"; }

TEST(DocsChecks, NameTheNoteAndTheFilesOfEachViolation) {
  TempDir dir;
  const fs::path root = dir.path();
  write(root / "a/one.h", "// " + title("Twice") + "\n// Defined here.\n\n// " + title("Kept here") +
                              "\n// Body.\n// " + title("Kept here") + ", step 1: a citation.\n");
  write(root / "b/two.cpp", "// " + title("Twice") + "\n// And here.\n" +
                                "int x;  // See " + title("Nonexistent") + "\n" +
                                "// (" + kNote + " [Kept\n// here] in b/two.cpp)\n");
  write(root / "c/three.md", "Prose citing " + title("Nonexistent") + " and " + title("Kept here") +
                                 " in a/one.h.\nIt once lived in " + kOutsideDesign + ".\n");
  write(root / "build/junk.h", "// " + title("Ignored") + "\n");
  write(root / kNotesTable, "| note | where | what |\n|---|---|---|\n| `" + title("Kept here") +
                                "` | a/other.h | x |\n| `" + title("Gone") + "` | z.h | y |\n");

  const auto files = text_files(root);
  const Notes notes = scan_notes(files);
  EXPECT_EQ(notes.definitions.count("Ignored"), 0u) << "build trees are not scanned";
  ASSERT_EQ(notes.definitions.count("Kept here"), 1u);
  EXPECT_EQ(notes.definitions.at("Kept here").size(), 1u) << "a line citing a step is no definition";

  const std::string cited = joined(citation_problems(notes));
  EXPECT_NE(cited.find(title("Twice") + " is defined 2 times: a/one.h:1, b/two.cpp:1"),
            std::string::npos) << cited;
  EXPECT_NE(cited.find(title("Nonexistent") + " is cited but defined nowhere"), std::string::npos)
      << cited;
  EXPECT_NE(cited.find("cited at b/two.cpp:3, c/three.md:1"), std::string::npos) << cited;
  EXPECT_NE(cited.find("b/two.cpp:4 cites " + title("Kept here") +
                       " in b/two.cpp, but it is defined in a/one.h:4"),
            std::string::npos) << cited;
  EXPECT_EQ(cited.find("c/three.md:1 cites " + title("Kept here")), std::string::npos)
      << "a/one.h is where it is defined: " << cited;

  const std::string table = joined(table_problems(files, notes));
  EXPECT_NE(table.find(title("Twice") + ", defined at a/one.h:1, b/two.cpp:1, is not in the " +
                       "notes table of docs/architecture.md"),
            std::string::npos) << table;
  EXPECT_NE(table.find("docs/architecture.md:3 says " + title("Kept here") +
                       " is in a/other.h, but it is defined at a/one.h:4"),
            std::string::npos) << table;
  EXPECT_NE(table.find("docs/architecture.md:4 lists " + title("Gone") + ", which no file defines"),
            std::string::npos) << table;

  const std::string outside = joined(outside_design_problems(files));
  EXPECT_NE(outside.find("c/three.md:2 cites " + kOutsideDesign), std::string::npos) << outside;
  EXPECT_EQ(outside_design_problems(files).size(), 1u) << outside;
}

// docs/fsdp2.md's "tests/fsdp2/test_fsdp2_vs_ddp: N configurations" is the file's count of
// Fsdp2VsDdp tests (it said 13 when there were 17).
TEST(DocsCounts, Fsdp2ConfigurationsAreItsTestCases) {
  const std::string doc = read_text(fs::path(DPSCOPE_SOURCE_DIR) / "docs/fsdp2.md");
  const std::string tests = read_text(fs::path(DPSCOPE_SOURCE_DIR) / "tests/fsdp2/test_fsdp2_vs_ddp.cpp");
  const std::string quote = "tests/fsdp2/test_fsdp2_vs_ddp: ";
  const size_t at = doc.find(quote);
  ASSERT_NE(at, std::string::npos) << "docs/fsdp2.md no longer quotes the count; drop this test";
  size_t cases = 0;
  for (size_t p = tests.find("TEST(Fsdp2VsDdp,"); p != std::string::npos; p = tests.find("TEST(Fsdp2VsDdp,", p + 1)) ++cases;
  EXPECT_EQ(std::stoul(doc.substr(at + quote.size())), cases)
      << "docs/fsdp2.md quotes another count of configurations than tests/fsdp2/test_fsdp2_vs_ddp.cpp has";
}

}  // namespace
