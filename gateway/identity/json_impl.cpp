// The one translation unit that compiles Boost.JSON (header-only mode: its library is not a
// separate Debian package here), for tokens, key sets and the admin API's JSON.
#include <boost/json/src.hpp>
