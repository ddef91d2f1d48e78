// Tests of error messages: what a call throws, or that it throws with given fragments.
#pragma once

#include "megart/error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

// The message of the megart::Error `fn` throws; "" when it throws none.
inline std::string error_of(const std::function<void()> &fn) {
  try {
    fn();
  } catch (const megart::Error &e) {
    return e.what();
  }
  return "";
}

// Runs `fn`, which must throw megart::Error with every fragment in its message.
inline void expect_error(const std::function<void()> &fn, const std::vector<std::string> &fragments) {
  try {
    fn();
    ADD_FAILURE() << "expected megart::Error";
  } catch (const megart::Error &e) {
    for (const std::string &f : fragments)
      EXPECT_THAT(e.what(), ::testing::HasSubstr(f));
  }
}
