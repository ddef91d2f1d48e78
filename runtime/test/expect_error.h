// Runs `fn`, which must throw megart::Error with every fragment in its message.
#pragma once

#include "megart/error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

inline void expect_error(const std::function<void()> &fn, const std::vector<std::string> &fragments) {
  try {
    fn();
    ADD_FAILURE() << "expected megart::Error";
  } catch (const megart::Error &e) {
    for (const std::string &f : fragments)
      EXPECT_THAT(e.what(), ::testing::HasSubstr(f));
  }
}
