// Boost.Beast and Boost.Asio for the transport's .cpp files. GCC's
// -Wmaybe-uninitialized misfires inside Beast's parser (an empty
// boost::optional returned by value) in sanitizer builds; it is silenced for
// these headers only.
#pragma once
#include <utility>  // Boost 1.74's asio/awaitable.hpp uses std::exchange without it

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#pragma GCC diagnostic pop
