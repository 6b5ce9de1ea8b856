// test_quoted_commands: the `dpscope` and `dpscope-view` commands the READMEs quote still run. Each
// command of a shell block in README.md and tutorials/*/README.md is parsed as the binary parses
// it, without running: dpscope's in its parse-only mode (make_app(CommandMode::Validate)),
// dpscope-view's against the options its own --help declares. Synopses (README's headings, and
// `dpscope ...` spans in README.md, the tutorials' READMEs and docs/) name only options the
// command has, and README's headings name all of them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/app.h"
#include "tests/docs/source_tree.h"
#include "tests/test_util.h"
#include "trace/error.h"

namespace dpscope::docs_test {
namespace {

// One command or synopsis as a Markdown file quotes it.
struct Quoted {
  std::string where;  // "tutorials/20_fsdp1_vs_fsdp2/README.md:131"
  std::string text;   // the command, one line, comments and shell variables resolved
};

bool is_dpscope(const std::string& word) {
  return word == "dpscope" || word == "build/bin/dpscope" || word == "bin/dpscope";
}
bool is_viewer(const std::string& word) {
  return word == "dpscope-view" || word == "build/bin/dpscope-view" || word == "bin/dpscope-view";
}

// The words of a command line as the shell splits them (quotes kept together, no expansion).
std::vector<std::string> shell_words(const std::string& line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (const char ch : line) {
    if (quote) {
      if (ch == quote) quote = 0;
      else word += ch;
    } else if (ch == '\'' || ch == '"') {
      quote = ch;
      in_word = true;
    } else if (std::isspace(static_cast<unsigned char>(ch))) {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else {
      word += ch;
      in_word = true;
    }
  }
  if (in_word) words.push_back(word);
  return words;
}

// `line` without a trailing shell comment (" # ...").
std::string without_comment(const std::string& line) {
  const size_t at = line.find(" #");
  return at == std::string::npos ? line : line.substr(0, at);
}

// The dpscope and dpscope-view commands of the shell blocks of `file` (``` fences): a command's
// continuation lines (ending in '\') joined, and a `for VAR in A B ...` loop's $VAR taken as A.
std::vector<Quoted> fenced_commands(const TextFile& file) {
  std::vector<Quoted> commands;
  std::istringstream in(file.text);
  std::string line, pending;
  bool fenced = false;
  int number = 0, first = 0;
  std::map<std::string, std::string> loop_values;
  const std::regex loop(R"(^\s*for\s+(\w+)\s+in\s+(\S+))");
  while (std::getline(in, line)) {
    ++number;
    if (line.rfind("```", 0) == 0) {
      fenced = !fenced;
      loop_values.clear();
      continue;
    }
    if (!fenced) continue;
    std::smatch match;
    if (std::regex_search(line, match, loop)) loop_values[match[1]] = match[2];
    if (pending.empty()) first = number;
    std::string text = without_comment(line);
    const bool continued = !text.empty() && text.back() == '\\';
    pending += continued ? text.substr(0, text.size() - 1) : text;
    if (continued) continue;
    text = pending.substr(0, pending.find_last_not_of(" \t") + 1);
    pending.clear();
    for (const auto& [name, value] : loop_values) {
      text = std::regex_replace(text, std::regex("\\$\\{?" + name + "\\}?"), value);
    }
    std::vector<std::string> words = shell_words(text);
    if (!words.empty() && words[0] == "$") words.erase(words.begin());
    if (words.empty() || !(is_dpscope(words[0]) || is_viewer(words[0]))) continue;
    commands.push_back({file.path + ":" + std::to_string(first), text});
  }
  return commands;
}

// The spans in backticks outside the shell blocks of `file` that begin with dpscope or
// dpscope-view (a span may wrap onto the next line), and README's `### \`dpscope ...\`` headings.
std::vector<Quoted> quoted_spans(const TextFile& file) {
  std::vector<Quoted> spans;
  std::string prose;  // the text outside fences, fences blanked so that line numbers hold
  std::istringstream in(file.text);
  std::string line;
  bool fenced = false;
  while (std::getline(in, line)) {
    if (line.rfind("```", 0) == 0) fenced = !fenced;
    prose += (fenced || line.rfind("```", 0) == 0 ? std::string() : line) + "\n";
  }
  const std::regex span("`((?:build/bin/)?dpscope(?:-view)? [^`]*)`");
  for (auto it = std::sregex_iterator(prose.begin(), prose.end(), span); it != std::sregex_iterator(); ++it) {
    std::string text = (*it)[1];
    std::replace(text.begin(), text.end(), '\n', ' ');
    const auto line_number = 1 + std::count(prose.begin(), prose.begin() + it->position(), '\n');
    spans.push_back({file.path + ":" + std::to_string(line_number), text});
  }
  return spans;
}

// What `dpscope-view --help` declares: each option's names, whether it takes a value, and the
// options it needs and excludes (CLI11's "Needs:" and "Excludes:").
struct ViewerOption {
  bool takes_value = false;
  std::vector<std::string> needs, excludes;
};
using ViewerOptions = std::map<std::string, ViewerOption>;

ViewerOptions viewer_options(const std::string& help) {
  ViewerOptions options;
  std::istringstream in(help);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("  -", 0) != 0) continue;
    // "  --iteration UINT:NONNEGATIVE Needs: --screenshot Excludes: --zoom-sweep   With ...": the
    // names and their terms, up to the two spaces before the description.
    const std::vector<std::string> terms = shell_words(line.substr(2, line.find("  ", 2) - 2));
    ViewerOption option;
    std::vector<std::string>* list = nullptr;
    for (size_t i = 1; i < terms.size(); ++i) {
      if (terms[i] == "Needs:") list = &option.needs;
      else if (terms[i] == "Excludes:") list = &option.excludes;
      else if (list) list->push_back(terms[i]);
      else if (i == 1 && terms[i].rfind("(Env", 0) != 0) option.takes_value = true;  // its type
    }
    std::stringstream names(terms.at(0));
    std::string name;
    while (std::getline(names, name, ',')) options[name] = option;
  }
  return options;
}

// Why dpscope-view would refuse `args` (its arguments), "" when it would take them: an option
// it lacks, a value missing, an option without the one it needs or with one it excludes, no trace.
std::string viewer_refusal(const ViewerOptions& declared, const std::vector<std::string>& args) {
  std::set<std::string> given;
  size_t traces = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].rfind("-", 0) != 0) {
      ++traces;
      continue;
    }
    const std::string name = args[i].substr(0, args[i].find('='));
    const auto option = declared.find(name);
    if (option == declared.end()) return "dpscope-view has no option " + name;
    given.insert(name);
    if (option->second.takes_value && name == args[i]) {
      if (i + 1 == args.size()) return name + " needs a value";
      ++i;
    }
  }
  for (const std::string& name : given) {
    for (const std::string& needed : declared.at(name).needs) {
      if (!given.count(needed)) return name + " requires " + needed;
    }
    for (const std::string& excluded : declared.at(name).excludes) {
      if (given.count(excluded)) return name + " excludes " + excluded;
    }
  }
  return traces == 0 ? "no TRACE given" : "";
}

// Why `dpscope` would refuse `args` (after the program's name), "" when its parse-only mode takes
// them. A launch's program, when it is dpscope or dpscope-view, is checked as well, and so are
// `dpscope view TRACE`'s viewer options.
std::string dpscope_refusal(const ViewerOptions& viewer, std::vector<std::string> args) {
  std::vector<std::string> argv_strings{"dpscope"};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : argv_strings) argv.push_back(arg.data());
  try {
    const auto app = cli::make_app(cli::CommandMode::Validate);
    app->parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& error) {
    return std::string(error.get_name()) + ": " + error.what();
  } catch (const std::exception& error) {
    return error.what();
  }
  if (!args.empty() && args[0] == "launch") {
    const auto dashes = std::find(args.begin(), args.end(), "--");
    if (dashes + 1 < args.end() && is_dpscope(*(dashes + 1))) {
      return dpscope_refusal(viewer, std::vector<std::string>(dashes + 2, args.end()));
    }
    if (dashes + 1 < args.end() && is_viewer(*(dashes + 1))) {
      return viewer_refusal(viewer, std::vector<std::string>(dashes + 2, args.end()));
    }
  }
  if (args.size() > 1 && args[0] == "view") return viewer_refusal(viewer, std::vector<std::string>(args.begin() + 1, args.end()));
  return "";
}

// The options a synopsis names: its words that begin with '-', without brackets, "|" choices,
// "=VALUE" or closing punctuation; only those before a launch's " -- " (the program's follow).
std::vector<std::string> synopsis_options(const std::string& synopsis) {
  std::vector<std::string> options;
  const std::regex option(R"((^|[\s\[|(])(--?[A-Za-z][A-Za-z0-9-]*))");
  for (auto it = std::sregex_iterator(synopsis.begin(), synopsis.end(), option); it != std::sregex_iterator(); ++it) {
    options.push_back((*it)[2]);
  }
  return options;
}

// The CLI11 options of `dpscope <subcommand>` by every name ("-n", "--nproc-per-node"), and each
// option's names, one of which a synopsis lists (--help left out).
struct Subcommand {
  std::set<std::string> names;
  std::vector<std::vector<std::string>> options;
};

Subcommand subcommand_options(const std::string& name) {
  Subcommand out;
  const auto app = cli::make_app(cli::CommandMode::Validate);
  const CLI::App* sub = app->get_subcommand(name);
  for (const CLI::Option* option : sub->get_options()) {
    if (option->get_positional()) continue;
    std::vector<std::string> names;
    for (const std::string& s : option->get_snames()) names.push_back("-" + s);
    for (const std::string& l : option->get_lnames()) names.push_back("--" + l);
    out.names.insert(names.begin(), names.end());
    if (std::find(names.begin(), names.end(), "--help") == names.end()) out.options.push_back(names);
  }
  return out;
}

// The files whose quoted commands are checked, and those whose synopses are.
std::vector<TextFile> readmes(bool with_docs) {
  std::vector<TextFile> files;
  for (TextFile& file : text_files(DPSCOPE_SOURCE_DIR)) {
    const std::string& p = file.path;
    const bool tutorial = p.rfind("tutorials/", 0) == 0 && p.size() > 10 && p.find('/', 10) != std::string::npos &&
                          p.substr(p.find('/', 10)) == "/README.md";
    const bool doc = p.rfind("docs/", 0) == 0 && p.size() > 3 && p.substr(p.size() - 3) == ".md";
    if (p == "README.md" || tutorial || (with_docs && doc)) files.push_back(std::move(file));
  }
  return files;
}

ViewerOptions built_viewer_options() {
  const auto help = testing::run_command(std::string(DPSCOPE_BIN_DIR) + "/dpscope-view --help");
  if (help.exit_code != 0) return {};
  return viewer_options(help.output);
}

TEST(QuotedCommands, TheViewerDeclaresItsOptionsInItsHelp) {
  const ViewerOptions options = viewer_options(
      "Options:\n"
      "  -h,--help                   Print this help message and exit\n"
      "  --live                      Follow a trace\n"
      "  --screenshot TEXT           Headless: draw\n"
      "  --iteration UINT:NONNEGATIVE Needs: --screenshot Excludes: --zoom-sweep\n"
      "                              With --screenshot: show this iteration\n");
  ASSERT_EQ(options.size(), 5u);
  EXPECT_FALSE(options.at("--live").takes_value);
  EXPECT_TRUE(options.at("--iteration").takes_value);
  EXPECT_EQ(options.at("--iteration").needs, std::vector<std::string>{"--screenshot"});
  EXPECT_EQ(options.at("--iteration").excludes, std::vector<std::string>{"--zoom-sweep"});
  EXPECT_EQ(viewer_refusal(options, {"run.sqlite", "--iteration", "1"}), "--iteration requires --screenshot");
  EXPECT_EQ(viewer_refusal(options, {"run.sqlite", "--screenshot", "a.png", "--iteration", "1"}), "");
  EXPECT_EQ(viewer_refusal(options, {"run.sqlite", "--no-such"}), "dpscope-view has no option --no-such");
  EXPECT_EQ(viewer_refusal(options, {"--live"}), "no TRACE given");
}

TEST(QuotedCommands, AStaleOptionIsRefused) {
  const ViewerOptions none;
  EXPECT_NE(dpscope_refusal(none, {"stats", "--no-such-option", "run.sqlite"}), "");
  EXPECT_NE(dpscope_refusal(none, {"launch", "-n", "2", "--", "build/bin/dpscope", "train", "--bucket-cap", "1"}), "");
  EXPECT_EQ(dpscope_refusal(none, {"launch", "-n", "2", "--", "build/bin/dpscope", "train", "--bucket-cap-mb", "1"}), "");
  const std::vector<Quoted> found = fenced_commands(
      {"x.md", "text\n```sh\nfor n in 2 4; do\n  build/bin/dpscope launch -n $n -- prog  # two ranks\n"
               "done\nbuild/bin/dpscope-view a \\\n  --compare b\n```\n`dpscope stats --json`\n"});
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].text, "  build/bin/dpscope launch -n 2 -- prog");
  EXPECT_EQ(found[1].where, "x.md:6");
  EXPECT_EQ(shell_words(found[1].text), (std::vector<std::string>{"build/bin/dpscope-view", "a", "--compare", "b"}));
  EXPECT_EQ(synopsis_options("dpscope whatif TRACE [--sweep] [--clock measured|cluster] [-n N]"),
            (std::vector<std::string>{"--sweep", "--clock", "-n"}));
}

// Every command quoted in a shell block of README.md or a tutorial's README is one the binary
// takes (run it as `dpscope` would, up to where it would start work).
TEST(QuotedCommands, EveryQuotedCommandParses) {
  const ViewerOptions viewer = built_viewer_options();
  size_t checked = 0, viewer_commands = 0;
  for (const TextFile& file : readmes(false)) {
    for (const Quoted& command : fenced_commands(file)) {
      std::vector<std::string> words = shell_words(command.text);
      if (is_viewer(words[0]) && viewer.empty()) {
        ++viewer_commands;
        continue;
      }
      const std::vector<std::string> args(words.begin() + 1, words.end());
      const std::string refusal = is_viewer(words[0]) ? viewer_refusal(viewer, args) : dpscope_refusal(viewer, args);
      EXPECT_EQ(refusal, "") << command.where << ": `" << command.text << "` would be refused";
      ++checked;
    }
  }
  EXPECT_GE(checked, 40u) << "the READMEs' shell blocks were not found";
  if (viewer_commands > 0) {
    GTEST_SKIP() << viewer_commands << " dpscope-view commands not checked: dpscope-view was not built";
  }
}

// Every option a synopsis or an inline `dpscope ...` names is one the command has.
TEST(QuotedCommands, SynopsesNameOnlyOptionsTheCommandHas) {
  const ViewerOptions viewer = built_viewer_options();
  const auto app = cli::make_app(cli::CommandMode::Validate);
  for (const TextFile& file : readmes(true)) {
    for (const Quoted& span : quoted_spans(file)) {
      std::string text = span.text;
      // A launched dpscope: its own synopsis after " -- ".
      const size_t dashes = text.find(" -- ");
      std::string launched = dashes == std::string::npos ? "" : text.substr(dashes + 4);
      if (dashes != std::string::npos) text = text.substr(0, dashes);
      for (const std::string& part : {text, launched}) {
        const std::vector<std::string> part_words = shell_words(part);
        if (part_words.empty()) continue;
        if (is_viewer(part_words[0])) {
          for (const std::string& option : synopsis_options(part)) {
            if (!viewer.empty()) EXPECT_TRUE(viewer.count(option)) << span.where << ": `" << span.text << "`: dpscope-view has no option " << option;
          }
          continue;
        }
        // "`dpscope ...`", "`dpscope stats`' figures": no command named.
        if (!is_dpscope(part_words[0]) || part_words.size() < 2 ||
            !std::regex_match(part_words[1], std::regex("[a-z]+"))) {
          continue;
        }
        const std::vector<CLI::App*> commands = app->get_subcommands([](CLI::App*) { return true; });
        if (std::none_of(commands.begin(), commands.end(),
                         [&](const CLI::App* c) { return c->get_name() == part_words[1]; })) {
          ADD_FAILURE() << span.where << ": `" << span.text << "`: dpscope has no command " << part_words[1];
          continue;
        }
        const Subcommand sub = subcommand_options(part_words[1]);
        for (const std::string& option : synopsis_options(part)) {
          EXPECT_TRUE(sub.names.count(option)) << span.where << ": `" << span.text << "`: dpscope " << part_words[1]
                                               << " has no option " << option;
        }
      }
    }
  }
}

// README's `### \`dpscope NAME ...\`` headings are the commands' synopses: each names every
// option of its command, unless it says "[options]" (then the list below it does).
TEST(QuotedCommands, ReadmeHeadingsNameEveryOption) {
  const std::string readme = read_text(std::string(DPSCOPE_SOURCE_DIR) + "/README.md");
  const std::regex heading(R"(\n### `dpscope (\w+)([^`]*)`)");
  size_t headings = 0;
  for (auto it = std::sregex_iterator(readme.begin(), readme.end(), heading); it != std::sregex_iterator(); ++it) {
    ++headings;
    const std::string name = (*it)[1], synopsis = (*it)[2];
    if (synopsis.find("[options]") != std::string::npos) continue;
    const std::vector<std::string> named = synopsis_options(synopsis.substr(0, synopsis.find(" -- ")));
    for (const std::vector<std::string>& names : subcommand_options(name).options) {
      EXPECT_TRUE(std::find_first_of(named.begin(), named.end(), names.begin(), names.end()) != named.end())
          << "README.md's heading `dpscope " << name << synopsis << "` leaves out " << names.back()
          << ": add it to the heading";
    }
  }
  EXPECT_GE(headings, 8u);
}

}  // namespace
}  // namespace dpscope::docs_test
