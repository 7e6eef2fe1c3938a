// keras_relmem_native._grpc_front_end: gRPC's transport in C++, every call answered by a Python function.
//
// Python's gRPC servers pay for HTTP/2 and for each call's hand-offs in the
// interpreter (a polling thread, a worker pool, several completion-queue
// round trips under the interpreter lock): about a third of a millisecond a
// call on a small CPU before any model work. TF Serving's C++ server pays a
// fraction of that. Here the C++ library speaks HTTP/2 and gRPC, and each
// call costs one Python call: `handler(method, request_bytes, token)` returns
// `(status_code, details, response_bytes)`.
//
// A call answered later: the handler returns kStream (-1) or kLater (-2)
// instead, and Python answers the call's `token`, now or later and from any
// thread, with `write(token, bytes)` and `finish(token, code, details[,
// last])`. So a server-streaming method (the health service's `Watch`) sends
// its responses, and a unary one waiting for its batch holds no thread (its
// one response goes out with its status, `finish`'s `last`). For kStream,
// `stream_done(token)` tells Python when the call is over (finished, or
// cancelled by the client or at shutdown), as grpc's own server runs a
// context's callbacks.
//
// Threading: `serve(i)` is run by Python thread i, which owns completion queue
// i. The thread asks for one call at a time, reads its request, calls the
// handler with the interpreter lock held and answers, all on that thread: no
// hand-off between threads, and a busy thread holds no pending call, so a new
// call always goes to an idle thread (or waits in gRPC until one frees up).
// The handler runs on the thread's own Python thread state, so thread-locals
// (TensorFlow's eager context among them) persist from call to call.

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <pybind11/pybind11.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace py = pybind11;

namespace {

// What the handler answers for a call it answers later through its token: kStream when Python wants
// `stream_done(token)` once the call is over, kLater when not.
constexpr int kStream = -1;
constexpr int kLater = -2;

struct Queue;
struct Call;

// A completion-queue tag: which call, and whether it is the call's operation or its end.
struct Tag {
  enum class Kind { kOperation, kDone };
  Call* call;
  Kind kind;
};

// One call on one completion queue. Its operations (new call, read, writes, finish) run one at a time
// under `operation`; `done` comes once when the call is over (AsyncNotifyWhenDone). The call is deleted
// when both have settled: `done` seen and no operation in flight (or at once, if it never started).
struct Call {
  enum class Step { kNewCall, kRead, kFinish, kStreaming };
  explicit Call(Queue* owner) : queue(owner) {}
  Queue* queue;
  Step step = Step::kNewCall;
  grpc::GenericServerContext context;
  grpc::GenericServerAsyncReaderWriter stream{&context};
  grpc::ByteBuffer request;
  grpc::ByteBuffer response;
  Tag operation{this, Tag::Kind::kOperation};
  Tag done{this, Tag::Kind::kDone};
  bool in_flight = false;  // an operation started whose tag has not come back
  bool done_seen = false;
  // A call answered through its token: its state, shared with Python's threads (under
  // FrontEnd::streams_mutex_). Every call is in the token table while its handler runs.
  int64_t token = 0;
  bool notify_done = false;      // kStream: Python hears stream_done(token)
  std::deque<std::string> writes;
  bool finishing = false;        // Python asked to finish: no more writes
  bool finish_started = false;
  bool over = false;             // done, or a write failed: nothing more goes out
  grpc::Status status;
};

// A completion queue, served by one thread. Operations are started on it under `mutex`, never once it
// is shut down: gRPC forbids an operation on a queue that is shut down, and a queue may only be shut
// down after its server (`FrontEnd::Shutdown`).
struct Queue {
  std::unique_ptr<grpc::ServerCompletionQueue> queue;
  std::mutex mutex;
  bool shut = false;
  std::atomic<bool> served{false};
};

class FrontEnd {
 public:
  FrontEnd(py::function handler, py::function stream_done, const std::string& address, int threads,
           int max_receive_bytes)
      : handler_(std::move(handler)), stream_done_(std::move(stream_done)) {
    if (threads < 1) throw std::invalid_argument("threads must be at least 1");
    grpc::ServerBuilder builder;
    builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port_);
    builder.RegisterAsyncGenericService(&service_);
    // A busy port must fail to bind rather than silently share traffic with another server.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    builder.SetMaxReceiveMessageSize(max_receive_bytes);
    builder.SetMaxSendMessageSize(-1);
    for (int i = 0; i < threads; ++i) {
      queues_.push_back(std::make_unique<Queue>());
      queues_.back()->queue = builder.AddCompletionQueue();
    }
    server_ = builder.BuildAndStart();
    if (!server_ || port_ == 0) {
      server_.reset();
      for (auto& queue : queues_) Drain(queue->queue.get());
      throw std::runtime_error("cannot bind gRPC to " + address);
    }
  }

  ~FrontEnd() { Shutdown(0.0); }

  int port() const { return port_; }
  int threads() const { return static_cast<int>(queues_.size()); }

  // Answer calls on completion queue `index` until `shutdown`; run by one Python thread per queue.
  void Serve(int index) {
    if (index < 0 || index >= threads()) throw std::out_of_range("no completion queue " + std::to_string(index));
    Queue& queue = *queues_[index];
    if (queue.served.exchange(true)) {
      if (stopping_) return;  // shut down before this thread started: nothing to serve
      throw std::logic_error("completion queue " + std::to_string(index) + " is served already");
    }
    py::gil_scoped_release unlocked;
    RequestCall(queue);
    void* tag = nullptr;
    bool ok = false;
    while (queue.queue->Next(&tag, &ok)) {
      Tag* event = static_cast<Tag*>(tag);
      Call* call = event->call;
      if (event->kind == Tag::Kind::kDone) {
        Done(call);
        continue;
      }
      if (call->step == Call::Step::kStreaming) {  // its state is shared with Python's threads: under a lock
        Streamed(call, ok);
        continue;
      }
      call->in_flight = false;  // this thread alone touches a call that does not stream
      switch (call->step) {
        case Call::Step::kNewCall:
          if (!ok) {  // the server is shutting down: this queue gets no more calls (and this one no `done`)
            delete call;
            break;
          }
          call->step = Call::Step::kRead;
          Begin(call, [call] { call->stream.Read(&call->request, &call->operation); });
          break;
        case Call::Step::kRead:
          Answer(call, ok);
          Settle(call);
          // Free again: only now ask for the next call (a busy thread must not hold one).
          if (!stopping_) RequestCall(queue);
          break;
        case Call::Step::kFinish:
          Settle(call);
          break;
        case Call::Step::kStreaming:
          break;  // handled above
      }
    }
  }

  // Queue a response of call `token`; false when the call is over (the client went away, the server
  // stopped) or finishing. Never waits for the network, nor lets go of the interpreter lock: the lock
  // below is only ever held for a few instructions, by threads that do not wait for the interpreter while
  // they hold it, and a thread answering a batch would otherwise hand the interpreter to another thread
  // at every response.
  bool Write(int64_t token, std::string data) {
    std::lock_guard<std::mutex> lock(streams_mutex_);
    Call* call = Stream(token);
    if (call == nullptr || call->finishing) return false;
    call->writes.push_back(std::move(data));
    if (!call->in_flight) NextStreamOperation(call);
    return true;
  }

  // End call `token` with a status once its queued responses are sent, `last` (bytes, or None) the last
  // of them (sent with the status: a unary call's one response); false when the call is over.
  bool Finish(int64_t token, int code, std::string details, py::object last) {
    std::string data;
    bool has_last = !last.is_none();
    if (has_last) data = last.cast<std::string>();
    std::lock_guard<std::mutex> lock(streams_mutex_);
    Call* call = Stream(token);
    if (call == nullptr || call->finishing) return false;
    if (has_last) call->writes.push_back(std::move(data));
    call->finishing = true;
    call->status = grpc::Status(static_cast<grpc::StatusCode>(code), details);
    if (!call->in_flight) NextStreamOperation(call);
    return true;
  }

  // Stop taking calls; calls in flight (open streams too) get `grace` seconds to finish, then are
  // cancelled. Every `serve` returns once its queue is drained.
  void Shutdown(double grace) {
    if (!server_ || stopping_.exchange(true)) return;
    py::gil_scoped_release unlocked;
    auto deadline = std::chrono::system_clock::now() +
                    std::chrono::microseconds(static_cast<int64_t>(grace * 1e6));
    server_->Shutdown(deadline);
    for (auto& queue : queues_) {
      {
        std::lock_guard<std::mutex> lock(queue->mutex);
        queue->queue->Shutdown();
        queue->shut = true;
      }
      if (!queue->served.exchange(true)) Drain(queue->queue.get(), false);  // no thread will
    }
  }

 private:
  // Start an operation of `call` on its queue unless the queue is shut down; false when not started (no
  // tag will come for it).
  template <typename Operation>
  static bool Begin(Call* call, Operation operation) {
    std::lock_guard<std::mutex> lock(call->queue->mutex);
    if (call->queue->shut) return false;
    operation();
    call->in_flight = true;
    return true;
  }

  // Delete a unary call once it is over: its `done` seen and no operation in flight.
  static void Settle(Call* call) {
    if (call->step != Call::Step::kStreaming && call->done_seen && !call->in_flight) delete call;
  }

  void RequestCall(Queue& queue) {
    auto* call = new Call(&queue);
    // Asked for before the call starts, as gRPC requires; it comes only for calls that start.
    call->context.AsyncNotifyWhenDone(&call->done);
    grpc::ServerCompletionQueue* completion = queue.queue.get();
    if (!Begin(call, [&] {
          service_.RequestCall(&call->context, &call->stream, completion, completion, &call->operation);
        }))
      delete call;
  }

  static void Drain(grpc::ServerCompletionQueue* queue, bool shut_down = true) {
    if (shut_down) queue->Shutdown();
    void* tag = nullptr;
    bool ok = false;
    // Only calls never started can be left on a queue no thread served: each has one tag, its request.
    while (queue->Next(&tag, &ok)) delete static_cast<Tag*>(tag)->call;
  }

  void FinishUnary(Call* call, const grpc::Status& status) {
    call->step = Call::Step::kFinish;
    Begin(call, [&] { call->stream.Finish(status, &call->operation); });
  }

  void Answer(Call* call, bool read_ok) {
    if (!read_ok) {
      FinishUnary(call, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the call sent no request message"));
      return;
    }
    std::vector<grpc::Slice> slices;
    call->request.Dump(&slices);
    std::string request;
    request.reserve(call->request.Length());
    for (const auto& slice : slices) request.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    // In the token table before Python sees the call: a handler may answer it through the token at once,
    // from another thread, before it returns.
    int64_t token;
    {
      std::lock_guard<std::mutex> lock(streams_mutex_);
      token = ++last_token_;
      call->token = token;
      call->step = Call::Step::kStreaming;
      streams_[token] = call;
    }
    int code = 0;
    std::string details, response;
    {
      py::gil_scoped_acquire locked;
      try {
        py::tuple answer = handler_(call->context.method(), py::bytes(request), token);
        code = answer[0].cast<int>();
        details = answer[1].cast<std::string>();
        response = answer[2].cast<std::string>();
      } catch (py::error_already_set& error) {
        // The Python side turns every failure into a status; this is the last guard.
        code = static_cast<int>(grpc::StatusCode::INTERNAL);
        details = std::string("the request handler failed: ") + error.what();
      } catch (std::exception& error) {
        code = static_cast<int>(grpc::StatusCode::INTERNAL);
        details = std::string("the request handler's answer is malformed: ") + error.what();
      }
    }
    {
      std::lock_guard<std::mutex> lock(streams_mutex_);
      if (code == kStream || code == kLater) {  // answered through the token, now or later
        call->notify_done = code == kStream;
        return;
      }
      // Answered now. (A handler that also used the token broke the protocol: its token's answer stands.)
      if (call->finishing || call->in_flight || !call->writes.empty()) return;
      streams_.erase(token);
      call->step = Call::Step::kRead;
    }
    if (code != 0) {
      FinishUnary(call, grpc::Status(static_cast<grpc::StatusCode>(code), details));
      return;
    }
    grpc::Slice slice(response);
    call->response = grpc::ByteBuffer(&slice, 1);
    call->step = Call::Step::kFinish;
    Begin(call, [&] { call->stream.WriteAndFinish(call->response, grpc::WriteOptions(), grpc::Status::OK,
                                                   &call->operation); });
  }

  // -- calls answered through their token: every step under streams_mutex_, since Python's threads write
  // and finish ----------------------------------------------------------------------------------------
  Call* Stream(int64_t token) {
    auto found = streams_.find(token);
    return found == streams_.end() || found->second->over ? nullptr : found->second;
  }

  // The next write, or the finish once the writes are out (under streams_mutex_, nothing in flight).
  void NextStreamOperation(Call* call) {
    if (call->over || call->finish_started) return;
    if (!call->writes.empty()) {
      grpc::Slice slice(call->writes.front());
      call->writes.pop_front();
      call->response = grpc::ByteBuffer(&slice, 1);
      if (call->finishing && call->writes.empty() && call->status.ok()) {  // the last response, with the status
        call->finish_started = true;
        Begin(call, [&] { call->stream.WriteAndFinish(call->response, grpc::WriteOptions(), call->status,
                                                       &call->operation); });
        return;
      }
      if (!Begin(call, [&] { call->stream.Write(call->response, &call->operation); })) call->over = true;
    } else if (call->finishing) {
      call->finish_started = true;
      Begin(call, [&] { call->stream.Finish(call->status, &call->operation); });
    }
  }

  // A streaming call's write or finish came back.
  void Streamed(Call* call, bool ok) {
    std::lock_guard<std::mutex> lock(streams_mutex_);
    call->in_flight = false;
    if (!ok) {  // the client is gone: the rest would go nowhere
      call->over = true;
      call->writes.clear();
    }
    NextStreamOperation(call);
    if (call->done_seen && !call->in_flight) delete call;
  }

  // A call is over. A streaming one leaves the table (Python's writes to it now fail) and Python hears of it.
  void Done(Call* call) {
    int64_t token = 0;
    bool settled;
    {
      std::lock_guard<std::mutex> lock(streams_mutex_);
      call->done_seen = true;
      if (call->step == Call::Step::kStreaming) {
        streams_.erase(call->token);
        if (call->notify_done) token = call->token;
        call->over = true;
        call->writes.clear();
      }
      settled = !call->in_flight;
    }
    if (token != 0) {
      py::gil_scoped_acquire locked;
      try {
        stream_done_(token);
      } catch (py::error_already_set& error) {
        error.discard_as_unraisable("keras_relmem_native: stream_done");
      }
    }
    // A call with an operation in flight (a unary call cancelled mid-way) goes when the operation returns.
    if (settled) delete call;
  }

  py::function handler_, stream_done_;
  grpc::AsyncGenericService service_;
  // Declared before the server: members are destroyed in reverse order, and the server must go first.
  std::vector<std::unique_ptr<Queue>> queues_;
  std::unique_ptr<grpc::Server> server_;
  std::atomic<bool> stopping_{false};
  int port_ = 0;
  std::mutex streams_mutex_;
  std::unordered_map<int64_t, Call*> streams_;
  int64_t last_token_ = 0;
};

}  // namespace

PYBIND11_MODULE(_grpc_front_end, module) {
  module.doc() = "gRPC's transport in C++ (the system's gRPC library), every call answered by Python.";
  // What the Python side checks: a build older than its protocol must be rebuilt, not half work.
  module.attr("PROTOCOL") = 3;
  module.attr("STREAM") = kStream;
  module.attr("LATER") = kLater;
  py::class_<FrontEnd>(module, "FrontEnd")
      .def(py::init<py::function, py::function, const std::string&, int, int>(), py::arg("handler"),
           py::arg("stream_done"), py::arg("address"), py::arg("threads"), py::arg("max_receive_bytes"),
           "Bind `address` and start taking calls; `handler(method, request, token)` answers each "
           "`(code, details, response)`, or `(STREAM, '', b'')` / `(LATER, '', b'')` for a call it answers "
           "through `token` with `write` and `finish`; after STREAM, `stream_done(token)` says the call is over. "
           "Raises RuntimeError when the address cannot be bound.")
      .def_property_readonly("port", &FrontEnd::port)
      .def_property_readonly("threads", &FrontEnd::threads)
      .def("serve", &FrontEnd::Serve, py::arg("index"),
           "Answer calls on completion queue `index` until shutdown (run by one thread per queue).")
      .def("write", &FrontEnd::Write, py::arg("token"), py::arg("data"),
           "Queue a response of call `token`; False when the call is over or finishing.")
      .def("finish", &FrontEnd::Finish, py::arg("token"), py::arg("code"), py::arg("details"),
           py::arg("last") = py::none(),
           "End call `token` with a status after its queued responses and `last` (bytes, sent with the "
           "status); False when it is over.")
      .def("shutdown", &FrontEnd::Shutdown, py::arg("grace"),
           "Stop taking calls; those in flight get `grace` seconds. Every `serve` then returns.");
}
