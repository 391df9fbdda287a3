// Helpers of the JobSpec validation tests: a spec that validates, and the
// check that a bad one is refused with INVALID_ARGUMENT naming its field.
#ifndef GRADSYNC_TESTS_COMMON_SPEC_TEST_UTIL_H_
#define GRADSYNC_TESTS_COMMON_SPEC_TEST_UTIL_H_

#include <string>

#include <gtest/gtest.h>

#include "common/spec/job_spec.h"

namespace gradsync {
namespace spec_testing {

// Four workers, batch 32; everything else left for validation to fill in.
inline v1::JobSpec Good() {
  v1::JobSpec s;
  s.set_workers(4);
  s.set_batch_size(32);
  return s;
}

// ValidateJobSpec refuses `s` with INVALID_ARGUMENT "field: ...".
inline void ExpectBad(const v1::JobSpec& s, const std::string& field,
                      int available_ps_shards = 1) {
  auto r = ValidateJobSpec(s, available_ps_shards);
  ASSERT_FALSE(r.ok()) << field;
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(r.status().message()).rfind(field + ":", 0), 0u)
      << r.status().message();
}

}  // namespace spec_testing
}  // namespace gradsync

#endif  // GRADSYNC_TESTS_COMMON_SPEC_TEST_UTIL_H_
