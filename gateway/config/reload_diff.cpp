#include "gateway/config/reload_diff.hpp"
