# frozen_string_literal: true

module Stagedrain
  # Follows the relay's version: the client writes the rows that relay reads.
  VERSION = "0.1.0"
end
