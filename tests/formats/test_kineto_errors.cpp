// Tests of the Kineto import's refusals (formats/kineto_import.h): each bad input gets one
// KinetoError naming the file (and the byte offset where one is known), and leaves no output, not
// even a partial one; an older output file survives a failed import untouched.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "tests/formats/kineto_fixture.h"

namespace dpscope::formats {
namespace {

using namespace kineto_test;

// Imports `inputs` into DIR/run.sqlite expecting a refusal; returns its message after checking
// that it is one line, names `culprit`, and that the directory holds nothing new.
std::string refused(const testing::TempDir& dir, const std::vector<std::string>& inputs,
                    const std::string& culprit) {
  const auto before = std::distance(std::filesystem::directory_iterator(dir.path()),
                                    std::filesystem::directory_iterator());
  KinetoImportOptions options;
  options.inputs = inputs;
  options.out = dir.file("run.sqlite");
  std::string message;
  try {
    import_kineto(options, [](const std::string&) {});
    ADD_FAILURE() << "the import succeeded";
  } catch (const KinetoError& error) {
    message = error.what();
  }
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_EQ(message.rfind(culprit, 0), 0u) << "names the file first: " << message;
  EXPECT_FALSE(std::filesystem::exists(options.out));
  const auto after = std::distance(std::filesystem::directory_iterator(dir.path()),
                                   std::filesystem::directory_iterator());
  EXPECT_EQ(after, before) << "a temporary file was left behind";
  return message;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(KinetoErrors, TruncatedGzipNamesTheCompressedOffset) {
  testing::TempDir dir;
  const std::string whole = read_bytes(shipped("nccl_data.json.gz"));
  const std::string cut = dir.file("cut.json.gz");
  write_file(cut, whole.substr(0, whole.size() / 2));
  const std::string message = refused(dir, {cut}, cut);
  EXPECT_NE(message.find("of the compressed file: the gzip stream is damaged or cut short"), std::string::npos)
      << message;
}

TEST(KinetoErrors, InvalidJsonNamesTheByteOffset) {
  testing::TempDir dir;
  const std::string bad = dir.file("bad.json");
  write_file(bad, "{\"traceEvents\": [{\"ph\": \"X\", \"name\": oops}]}");
  const std::string message = refused(dir, {bad}, bad);
  EXPECT_NE(message.find(": at byte 37: invalid JSON"), std::string::npos) << message;
}

TEST(KinetoErrors, JsonThatIsNotATraceIsRefused) {
  testing::TempDir dir;
  const std::string other = dir.file("package.json");
  write_file(other, "{\"name\": \"left-pad\", \"version\": \"1.3.0\"}");
  EXPECT_NE(refused(dir, {other}, other).find("not a PyTorch profiler trace: it has no \"traceEvents\""),
            std::string::npos);
  const std::string numbers = dir.file("numbers.json");
  write_file(numbers, "[1, 2, 3]");
  EXPECT_NE(refused(dir, {numbers}, numbers).find("at byte 2: an entry of the event list is not an object"),
            std::string::npos);
}

TEST(KinetoErrors, AnEventMissingAFieldIsNamedWithItsOffset) {
  testing::TempDir dir;
  const std::string bad = dir.file("nodur.json");
  write_file(bad, "{\"traceEvents\": [\n{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", \"pid\": 1, "
                  "\"tid\": 1, \"ts\": 5}\n]}");
  const std::string message = refused(dir, {bad}, bad);
  EXPECT_NE(message.find("at byte 17: a complete ('X') event without \"dur\""), std::string::npos) << message;
}

TEST(KinetoErrors, TwoFilesOfTheSameRankAreRefused) {
  testing::TempDir dir;
  const std::string rank0 = shipped("sampled_rank-0.json.gz");
  const std::string copy = dir.file("copy-of-rank-0.json.gz");
  std::filesystem::copy_file(rank0, copy);
  const std::string message = refused(dir, {rank0, copy}, copy);
  EXPECT_NE(message.find("rank 0 again"), std::string::npos) << message;
}

TEST(KinetoErrors, FilesOfDifferentRunsAreRefused) {
  testing::TempDir dir;
  const std::string nccl = shipped("nccl_data.json.gz");
  const std::string message = refused(dir, {shipped("sampled_rank-1.json.gz"), nccl}, nccl);
  EXPECT_NE(message.find("is from another run than"), std::string::npos) << message;
  EXPECT_NE(message.find("world_size 2, the other's 128"), std::string::npos) << message;
}

TEST(KinetoErrors, AMissingFileIsNamed) {
  testing::TempDir dir;
  const std::string missing = dir.file("nowhere.json");
  EXPECT_NE(refused(dir, {missing}, missing).find("cannot open it"), std::string::npos);
}

TEST(KinetoErrors, AFailedImportLeavesAnOlderOutputUntouched) {
  testing::TempDir dir;
  const std::string out = dir.file("run.sqlite");
  write_file(out, "an older run");
  const std::string bad = dir.file("bad.json");
  write_file(bad, "{\"traceEvents\": [");
  KinetoImportOptions options;
  options.inputs = {bad};
  options.out = out;
  EXPECT_THROW(import_kineto(options, [](const std::string&) {}), KinetoError);
  EXPECT_EQ(read_bytes(out), "an older run");
}

TEST(KinetoErrors, RankOptionNeedsOneFile) {
  KinetoImportOptions options;
  options.inputs = {"a.json", "b.json"};
  options.out = "run.sqlite";
  options.rank = 1;
  EXPECT_THROW(check_kineto_options(options), KinetoError);
  options.inputs = {"a.json"};
  EXPECT_NO_THROW(check_kineto_options(options));
  options.rank = -2;
  EXPECT_THROW(check_kineto_options(options), KinetoError);
}

}  // namespace
}  // namespace dpscope::formats
