# frozen_string_literal: true

require "bigdecimal"

module Stagedrain
  # JSON text as the framework's encoder wrote it, spelled so that a jsonb
  # column gives back what a worker's JSON.parse would have read from it.
  module Jsonb
    # A JSON string (skipped whole), or a number with an exponent.
    TOKEN = /"(?:[^"\\]|\\.)*"|(-?\d+(?:\.\d+)?[eE][-+]?\d+)/.freeze
    # Whether the text may hold an exponent at all (inside a string or not).
    EXPONENT = /\d[eE][-+]?\d/.freeze

    module_function

    # Ruby writes a Float of 1e16 or more as 1.0e+16, which jsonb's numeric
    # stores as 10000000000000000: JSON.parse then reads an Integer. Fixed
    # notation with a fraction (10000000000000000.0) keeps jsonb's scale, and
    # is the same number, so the worker reads the same Float.
    def for_jsonb(text)
      return text unless text.match?(EXPONENT)

      text.gsub(TOKEN) { Regexp.last_match(1) ? plain($1) : Regexp.last_match(0) }
    end

    def plain(number)
      s = BigDecimal(number).to_s("F")
      s.include?(".") ? s : "#{s}.0"
    end
  end
end
