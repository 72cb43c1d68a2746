# Fails its first run; retry_on then enqueues it again through the app's
# adapter, which in a worker that loads this app is :stagedrain too.
class FlakyJob < ApplicationJob
  retry_on RuntimeError, wait: 0, attempts: 2

  def perform(path)
    File.open(path, "a") { |f| f.puts "#{job_id} #{executions}" }
    raise "the first run fails" if executions == 1
  end
end
