// Strings that cross the wire are made valid UTF-8 (common/grpc/valid_utf8.h).
#include "common/grpc/valid_utf8.h"

#include <string>

#include <gtest/gtest.h>

#include "gradsync/v1/gradsync.pb.h"

namespace gradsync {
namespace {

TEST(ValidUtf8, KeepsValidTextAndEscapesEveryBadByte) {
  const std::string valid = "ok \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80";  // é € 😀
  EXPECT_TRUE(IsValidUtf8(valid));
  EXPECT_EQ(ValidUtf8(valid), valid);
  EXPECT_TRUE(IsValidUtf8(""));
  struct Case {
    std::string in, out;
  };
  const Case cases[] = {
      {"\xff", "\\xff"},
      {"a\x80z", "a\\x80z"},                         // lone continuation byte
      {"\xc3", "\\xc3"},                             // truncated at the end
      {"\xc3(", "\\xc3("},                           // bad continuation
      {"\xc0\xaf", "\\xc0\\xaf"},                    // overlong '/'
      {"\xe0\x80\xaf", "\\xe0\\x80\\xaf"},           // overlong, 3 bytes
      {"\xed\xa0\x80", "\\xed\\xa0\\x80"},           // surrogate U+D800
      {"\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"},  // above U+10FFFF
      {"\xf5", "\\xf5"},
  };
  for (const Case& c : cases) {
    EXPECT_FALSE(IsValidUtf8(c.in)) << c.out;
    EXPECT_EQ(ValidUtf8(c.in), c.out);
    EXPECT_TRUE(IsValidUtf8(ValidUtf8(c.in))) << c.out;
  }
}

TEST(ValidUtf8, RewritesEveryStringFieldOfAMessageAndParsesAfterwards) {
  v1::WorkerMessage m;
  v1::WorkerMessage::JobDone* d = m.mutable_job_done();
  d->set_job_id("j-1");
  d->set_error("forward failed: \xff\xfe in the module");
  d->add_bucket_algorithms("ring");
  d->add_bucket_algorithms("bad \x80");
  d->mutable_trace()->add_events()->set_name("op \xc0");
  // A proto3 string with these bytes does not parse at the receiver.
  v1::WorkerMessage back;
  EXPECT_FALSE(back.ParseFromString(m.SerializeAsString()));
  EXPECT_EQ(MakeStringsValidUtf8(&m), 3);
  ASSERT_TRUE(back.ParseFromString(m.SerializeAsString()));
  EXPECT_EQ(back.job_done().error(), "forward failed: \\xff\\xfe in the module");
  EXPECT_EQ(back.job_done().bucket_algorithms(0), "ring");
  EXPECT_EQ(back.job_done().bucket_algorithms(1), "bad \\x80");
  EXPECT_EQ(back.job_done().trace().events(0).name(), "op \\xc0");
  EXPECT_EQ(MakeStringsValidUtf8(&m), 0);  // nothing left to do
}

}  // namespace
}  // namespace gradsync
