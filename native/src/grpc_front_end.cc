// keras_relmem_native._grpc_front_end: gRPC's transport in C++, every call answered by a Python function.
//
// Python's gRPC servers pay for HTTP/2 and for each call's hand-offs in the
// interpreter (a polling thread, a worker pool, several completion-queue
// round trips under the interpreter lock): about a third of a millisecond a
// call on a small CPU before any model work. TF Serving's C++ server pays a
// fraction of that. Here the C++ library speaks HTTP/2 and gRPC, and each
// unary call costs one Python call: `handler(method, request_bytes)` returns
// `(status_code, details, response_bytes)`.
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
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;

namespace {

// One call on one completion queue: the call's own object is the tag of the step it waits for.
struct Call {
  enum class Step { kNewCall, kRead, kFinish };
  Step step = Step::kNewCall;
  grpc::GenericServerContext context;
  grpc::GenericServerAsyncReaderWriter stream{&context};
  grpc::ByteBuffer request;
  grpc::ByteBuffer response;
};

// A completion queue, served by one thread. Only that thread starts operations on it, always under
// `mutex` and never once it is shut down: gRPC forbids an operation on a queue that is shut down,
// and a queue may only be shut down after its server (`FrontEnd::Shutdown`).
struct Queue {
  std::unique_ptr<grpc::ServerCompletionQueue> queue;
  std::mutex mutex;
  bool shut = false;
  std::atomic<bool> served{false};
};

class FrontEnd {
 public:
  FrontEnd(py::function handler, const std::string& address, int threads, int max_receive_bytes)
      : handler_(std::move(handler)) {
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
      Call* call = static_cast<Call*>(tag);
      switch (call->step) {
        case Call::Step::kNewCall:
          if (!ok) {  // the server is shutting down: this queue gets no more calls
            delete call;
            break;
          }
          call->step = Call::Step::kRead;
          if (!Start(queue, [call] { call->stream.Read(&call->request, call); })) delete call;
          break;
        case Call::Step::kRead:
          call->step = Call::Step::kFinish;
          Answer(queue, call, ok);
          // Free again: only now ask for the next call (a busy thread must not hold one).
          if (!stopping_) RequestCall(queue);
          break;
        case Call::Step::kFinish:
          delete call;
          break;
      }
    }
  }

  // Stop taking calls; calls in flight get `grace` seconds to finish, then are cancelled. Every `serve`
  // returns once its queue is drained.
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
  // Start an operation on `queue` unless it is shut down; false when not started (no tag will come).
  template <typename Operation>
  static bool Start(Queue& queue, Operation operation) {
    std::lock_guard<std::mutex> lock(queue.mutex);
    if (queue.shut) return false;
    operation();
    return true;
  }

  void RequestCall(Queue& queue) {
    auto* call = new Call();
    grpc::ServerCompletionQueue* completion = queue.queue.get();
    if (!Start(queue, [&] { service_.RequestCall(&call->context, &call->stream, completion, completion, call); }))
      delete call;
  }

  static void Drain(grpc::ServerCompletionQueue* queue, bool shut_down = true) {
    if (shut_down) queue->Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (queue->Next(&tag, &ok)) delete static_cast<Call*>(tag);
  }

  void Finish(Queue& queue, Call* call, const grpc::Status& status) {
    if (!Start(queue, [&] { call->stream.Finish(status, call); })) delete call;
  }

  void Answer(Queue& queue, Call* call, bool read_ok) {
    if (!read_ok) {
      Finish(queue, call, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the call sent no request message"));
      return;
    }
    std::vector<grpc::Slice> slices;
    call->request.Dump(&slices);
    std::string request;
    request.reserve(call->request.Length());
    for (const auto& slice : slices) request.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    int code = 0;
    std::string details, response;
    {
      py::gil_scoped_acquire locked;
      try {
        py::tuple answer = handler_(call->context.method(), py::bytes(request));
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
    if (code != 0) {
      Finish(queue, call, grpc::Status(static_cast<grpc::StatusCode>(code), details));
      return;
    }
    grpc::Slice slice(response);
    call->response = grpc::ByteBuffer(&slice, 1);
    if (!Start(queue, [&] {
          call->stream.WriteAndFinish(call->response, grpc::WriteOptions(), grpc::Status::OK, call);
        }))
      delete call;
  }

  py::function handler_;
  grpc::AsyncGenericService service_;
  // Declared before the server: members are destroyed in reverse order, and the server must go first.
  std::vector<std::unique_ptr<Queue>> queues_;
  std::unique_ptr<grpc::Server> server_;
  std::atomic<bool> stopping_{false};
  int port_ = 0;
};

}  // namespace

PYBIND11_MODULE(_grpc_front_end, module) {
  module.doc() = "gRPC's transport in C++ (the system's gRPC library), every unary call answered by Python.";
  py::class_<FrontEnd>(module, "FrontEnd")
      .def(py::init<py::function, const std::string&, int, int>(), py::arg("handler"), py::arg("address"),
           py::arg("threads"), py::arg("max_receive_bytes"),
           "Bind `address` and start taking calls; `handler(method, request)` answers each "
           "`(code, details, response)`. Raises RuntimeError when the address cannot be bound.")
      .def_property_readonly("port", &FrontEnd::port)
      .def_property_readonly("threads", &FrontEnd::threads)
      .def("serve", &FrontEnd::Serve, py::arg("index"),
           "Answer calls on completion queue `index` until shutdown (run by one thread per queue).")
      .def("shutdown", &FrontEnd::Shutdown, py::arg("grace"),
           "Stop taking calls; those in flight get `grace` seconds. Every `serve` then returns.");
}
