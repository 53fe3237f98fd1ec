// SendResult: the value comes back from a failed send, and nothing else.
//
// This file defines the counting operator new for volt_channel_tests
// (heap_allocations() in test_support.hpp); no other file in the binary may.
#define VOLT_TEST_DEFINE_COUNTING_NEW 1

#include "volt/channel/send_result.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "test_support.hpp"

namespace volt {
namespace {

TEST(SendResult, DeliveredHasNoErrorAndNoValue) {
  SendResult<std::string> r;
  EXPECT_TRUE(r);
  EXPECT_TRUE(r.has_value());
  EXPECT_FALSE(r.error());
  EXPECT_NO_THROW(r.value());
}

TEST(SendResult, FailedHandsTheValueBack) {
  SendResult<std::unique_ptr<int>> r(errc::full, std::make_unique<int>(7));
  EXPECT_FALSE(r);
  EXPECT_EQ(r.error(), make_error_code(errc::full));
  ASSERT_TRUE(r.value_back());
  EXPECT_EQ(*r.value_back(), 7);
  std::unique_ptr<int> back = r.take_back();
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, 7);
}

TEST(SendResult, ValueThrowsTheReason) {
  SendResult<int> r(errc::closed, 3);
  try {
    r.value();
    FAIL() << "value() on a failed send must throw";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::closed));
  }
}

TEST(SendResult, ErrorCodesHaveMessages) {
  EXPECT_EQ(make_error_code(errc::empty).message(), "channel is empty");
  EXPECT_EQ(make_error_code(errc::full).message(), "channel is full");
  EXPECT_NE(make_error_code(errc::lagged).message().find("lagged"), std::string::npos);
}

}  // namespace
}  // namespace volt
