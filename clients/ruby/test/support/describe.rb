# frozen_string_literal: true

require "bigdecimal"
require "date"
require "active_support"
require "active_support/core_ext"

# A JSON-able picture of a Ruby value that keeps its class, so the test can
# compare what the app passed with what the worker's perform received.
module Describe
  module_function

  # TimeWithZone before Time and DateTime before Date (each is_a? the other),
  # HashWithIndifferentAccess before Hash.
  def call(value)
    case value
    when ActiveRecord::Base then {"record" => value.class.name, "id" => value.id, "persisted" => value.persisted?}
    when ActiveSupport::TimeWithZone then {"TimeWithZone" => value.iso8601(9), "zone" => value.time_zone.name}
    when Time then {"Time" => value.iso8601(9)}
    when DateTime then {"DateTime" => value.iso8601(9)}
    when Date then {"Date" => value.iso8601}
    when ActiveSupport::Duration then {"Duration" => value.value, "parts" => value.parts.to_a.sort.map { |k, v| [k.to_s, v] }}
    when BigDecimal then {"BigDecimal" => value.to_s}
    when Symbol then {"Symbol" => value.to_s}
    when ActiveSupport::HashWithIndifferentAccess then {"HashWithIndifferentAccess" => pairs(value)}
    when Hash then {"Hash" => pairs(value)}
    when Array then value.map { |v| call(v) }
    else {value.class.name => value}
    end
  end

  # In the Hash's own order: a staged job's Hash arrives with its keys in the
  # order the app wrote them.
  def pairs(hash)
    hash.map { |k, v| [call(k), call(v)] }
  end
end
