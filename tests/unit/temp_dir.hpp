#pragma once
// A temporary directory for the files of one test (the simulator's gateway, policy and log
// files), removed at the end.

#include <stdlib.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace tollgate::test {

struct temp_dir {
  std::string path;
  temp_dir() {
    char name[] = "/tmp/tollgate-test-XXXXXX";
    path = ::mkdtemp(name);
  }
  ~temp_dir() { std::system(("rm -rf '" + path + "'").c_str()); }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  /// Writes `text` as file `name` in it; its path.
  std::string write(const std::string& name, const std::string& text) const {
    const std::string p = path + "/" + name;
    std::ofstream(p) << text;
    return p;
  }
};

}  // namespace tollgate::test
