// The cluster token's plumbing without a network: comparison, loading and
// validation, random tokens, and the resolution of flags and environment
// (secure by default).
#include "common/grpc/security.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/grpc/security_flags.h"

namespace gradsync {
namespace {

constexpr char kToken[] = "0123456789abcdef0123456789abcdef";

std::string WriteTemp(const std::string& content) {
  char tmpl[] = "/tmp/gradsync-security-XXXXXX";
  const int fd = mkstemp(tmpl);
  EXPECT_GE(fd, 0);
  std::ofstream(tmpl) << content;
  return tmpl;
}

TEST(Security, ConstantTimeEqualsComparesWholeStrings) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals(kToken, kToken));
  EXPECT_FALSE(ConstantTimeEquals(kToken, "0123456789abcdef0123456789abcdeF"));
  EXPECT_FALSE(ConstantTimeEquals(kToken, "1123456789abcdef0123456789abcdef"));
  EXPECT_FALSE(ConstantTimeEquals(kToken, "0123456789abcdef"));  // a prefix
  EXPECT_FALSE(ConstantTimeEquals("", kToken));
}

TEST(Security, TokensAreTrimmedAndValidated) {
  EXPECT_EQ(*ValidateToken(absl::StrCat("  ", kToken, "\n"), "x"), kToken);
  EXPECT_EQ(ValidateToken("short", "x").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateToken(std::string(5000, 'a'), "x").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateToken("0123456789 abcdef0123", "x").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateToken("0123456789\x01"
                          "abcdef0123",
                          "x")
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Security, ReadTokenFileNamesTheFile) {
  const std::string path = WriteTemp(absl::StrCat(kToken, "\n"));
  EXPECT_EQ(*ReadTokenFile(path), kToken);
  absl::StatusOr<std::string> missing = ReadTokenFile(path + ".nope");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(path), std::string::npos);
  const std::string empty = WriteTemp("");
  EXPECT_EQ(ReadTokenFile(empty).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Security, RandomTokensAre256BitsOfHex) {
  absl::StatusOr<std::string> a = RandomToken();
  absl::StatusOr<std::string> b = RandomToken();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 64u);
  EXPECT_EQ(a->find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(*a, *b);
  EXPECT_TRUE(ValidateToken(*a, "random").ok());
}

TEST(SecurityFlags, DaemonsNeedATokenUnlessAuthIsNone) {
  SecuritySettings s;
  absl::StatusOr<ClusterSecurity> daemon = ResolveSecurity(s, SecurityRole::kDaemon);
  EXPECT_EQ(daemon.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(daemon.status().message().find("--auth=none"), std::string::npos);
  absl::StatusOr<ClusterSecurity> client = ResolveSecurity(s, SecurityRole::kClient);
  ASSERT_TRUE(client.ok());
  EXPECT_TRUE(client->token.empty());
  s.auth = "none";
  s.env_token = kToken;  // ignored under --auth=none
  absl::StatusOr<ClusterSecurity> none = ResolveSecurity(s, SecurityRole::kDaemon);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->token.empty());
  s.auth = "maybe";
  EXPECT_EQ(ResolveSecurity(s, SecurityRole::kDaemon).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SecurityFlags, TheFileWinsOverTheEnvironment) {
  SecuritySettings s;
  s.env_token = "environment-token-0123";
  EXPECT_EQ(ResolveSecurity(s, SecurityRole::kDaemon)->token, s.env_token);
  s.token_file = WriteTemp(kToken);
  EXPECT_EQ(ResolveSecurity(s, SecurityRole::kDaemon)->token, kToken);
  s.token_file += ".missing";  // a named file that is missing is an error
  absl::StatusOr<ClusterSecurity> missing = ResolveSecurity(s, SecurityRole::kDaemon);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("--token_file"), std::string::npos);
  s.token_file.clear();
  s.env_token = "bad token";
  EXPECT_EQ(ResolveSecurity(s, SecurityRole::kClient).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SecurityFlags, TlsFilesGoTogetherAndAreRead) {
  SecuritySettings s;
  s.env_token = kToken;
  s.tls_cert = WriteTemp("CERT");
  EXPECT_EQ(ResolveSecurity(s, SecurityRole::kDaemon).status().code(),
            absl::StatusCode::kInvalidArgument);
  s.tls_key = WriteTemp("KEY");
  s.tls_ca = WriteTemp("CA");
  absl::StatusOr<ClusterSecurity> tls = ResolveSecurity(s, SecurityRole::kDaemon);
  ASSERT_TRUE(tls.ok()) << tls.status();
  EXPECT_TRUE(tls->tls());
  EXPECT_EQ(tls->tls_cert_pem, "CERT");
  EXPECT_EQ(tls->tls_key_pem, "KEY");
  EXPECT_EQ(tls->tls_ca_pem, "CA");
  s.tls_ca += ".missing";
  EXPECT_EQ(ResolveSecurity(s, SecurityRole::kDaemon).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace gradsync
