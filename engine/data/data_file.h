// Reading and finding the data files that ship in data/ (digits.csv.gz, opticks.txt.gz): gzip or
// plain text through zlib, with errors that name the data set, the file and the fix. Shared by
// the loaders in digits.cpp and text.cpp.
#pragma once

#include <string>

namespace dpscope::data {

// The whole file, decompressed when it is gzip. A plain file must be text: a control byte other
// than tab, CR and LF means it is neither gzip nor text. Throws std::runtime_error
// "<what>: <path>: ..." for a missing, unreadable, corrupt or truncated file.
std::string read_data_file(const std::string& path, const std::string& what);

// Where data/<name> is: $DPSCOPE_DATA_DIR/<name>, else data/ beside the current directory or
// beside the executable's ../../ (build/bin -> repository), else the source tree's. Throws
// std::runtime_error "<what>: cannot find <name>; looked in: ..." naming every place it looked.
std::string find_data_file(const std::string& name, const std::string& what);

}  // namespace dpscope::data
