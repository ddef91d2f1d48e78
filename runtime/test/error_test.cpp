#include "megart/error.h"

#include <gtest/gtest.h>

TEST(Error, CarriesMessage) {
  try {
    throw megart::Error("checkpoint x.safetensors: tensor 'a' missing");
  } catch (const std::exception &e) {
    EXPECT_STREQ(e.what(), "checkpoint x.safetensors: tensor 'a' missing");
  }
}
