// The C++ RocketMQ client's TransactionMQProducer, bundled in PyPI rocketmq==0.4.4's librocketmq.so,
// made reachable from Python (ctypes): the package's C API has no transactional producer, but the
// library holds the whole class (sendMessageInTransaction, endTransaction, checkTransactionState).
// Only its constructor is inline in the client's headers, so it is rebuilt here, member by member,
// at the offsets the library's own ~TransactionMQProducer() uses (objdump -d -C librocketmq.so):
//
//   0x000  DefaultMQProducer (vptr first)         0x0a8  boost::thread_group m_threadpool
//   0x090  std::shared_ptr<TransactionListener>   0x1f0  boost::asio::io_service m_ioService
//   0x0a0  int m_thread_num                       0x200  io_service::work (the impl&: +0xb8 counts work)
//   0x208  end
//
// Everything else (the half message, END_TRANSACTION, answering CHECK_TRANSACTION_STATE on its
// thread pool) is the library's code. Built with the pre-C++11 std::string ABI the library uses:
//   g++ -shared -fPIC -D_GLIBCXX_USE_CXX11_ABI=0 cpp_transaction_shim.cpp -L DIR -lrocketmq -o OUT
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>

namespace rocketmq {
// Declarations of the library's exported members this file calls (names and signatures only; the
// objects themselves are made by the library's constructors in buffers large enough for them).
class MQMessage {
 public:
  MQMessage(const std::string& topic, const std::string& tags, const std::string& keys, const std::string& body);
  const std::string& getBody() const;
  const std::string& getProperty(const std::string& name) const;

 private:
  char storage_[512];
};
class MQMessageExt : public MQMessage {};
struct TransactionSendResultStorage {  // returned by value: the library writes it here
  char storage_[1024];
};
class TransactionListener {  // the library's interface: the destructor first, then the two calls
 public:
  virtual ~TransactionListener() {}
  virtual int executeLocalTransaction(const MQMessage& msg, void* arg) = 0;
  virtual int checkLocalTransaction(const MQMessageExt& msg) = 0;
};
class DefaultMQProducer {
 public:
  explicit DefaultMQProducer(const std::string& group);
};
class MQClientFactory {
 public:
  void sendHeartbeatToAllBroker();
};
class MQClient {  // DefaultMQProducer's base, at offset 0
 public:
  void setNamesrvAddr(const std::string& addr);
  void setInstanceName(const std::string& name);
  MQClientFactory* getFactory() const;
};
class TransactionMQProducer {
 public:
  void start();
  void shutdown();
  TransactionSendResultStorage sendMessageInTransaction(MQMessage& msg, void* arg);
};
}  // namespace rocketmq

namespace boost {
class thread_group {
 public:
  thread_group();
};
namespace asio {
class io_service {
 public:
  io_service();
};
}  // namespace asio
}  // namespace boost

extern "C" char _ZTVN8rocketmq21TransactionMQProducerE[];

namespace {
const std::size_t kListenerAt = 0x090, kThreadNumAt = 0x0a0, kThreadGroupAt = 0x0a8, kIoServiceAt = 0x1f0,
                  kWorkAt = 0x200, kSize = 0x208, kOutstandingWorkAt = 0xb8;

typedef int (*StateCallback)(const char* body, std::size_t length, const char* uniq_key);

// LocalTransactionState of the C++ client: COMMIT_MESSAGE 0, ROLLBACK_MESSAGE 1, UNKNOWN 2
class CallbackListener : public rocketmq::TransactionListener {
 public:
  CallbackListener(StateCallback execute, StateCallback check) : execute_(execute), check_(check) {}
  int executeLocalTransaction(const rocketmq::MQMessage& msg, void*) override { return ask(execute_, msg); }
  int checkLocalTransaction(const rocketmq::MQMessageExt& msg) override { return ask(check_, msg); }

 private:
  static int ask(StateCallback callback, const rocketmq::MQMessage& msg) {
    const std::string& body = msg.getBody();
    const std::string& key = msg.getProperty("UNIQ_KEY");
    return callback(body.data(), body.size(), key.c_str());
  }
  StateCallback execute_, check_;
};
}  // namespace

extern "C" {

void* tx_producer_new(const char* group, const char* namesrv, const char* instance, StateCallback execute,
                      StateCallback check) {
  char* p = static_cast<char*>(::operator new(kSize));
  std::memset(p, 0, kSize);
  new (p) rocketmq::DefaultMQProducer(group);
  *reinterpret_cast<void**>(p) = _ZTVN8rocketmq21TransactionMQProducerE + 16;  // past offset-to-top, typeinfo
  new (p + kListenerAt) std::shared_ptr<rocketmq::TransactionListener>(new CallbackListener(execute, check));
  *reinterpret_cast<int*>(p + kThreadNumAt) = 1;
  new (p + kThreadGroupAt) boost::thread_group();
  new (p + kIoServiceAt) boost::asio::io_service();
  char* impl = *reinterpret_cast<char**>(p + kIoServiceAt + 8);  // io_service::impl_
  *reinterpret_cast<char**>(p + kWorkAt) = impl;                 // io_service::work(m_ioService)
  reinterpret_cast<std::atomic<long>*>(impl + kOutstandingWorkAt)->fetch_add(1);
  reinterpret_cast<rocketmq::MQClient*>(p)->setNamesrvAddr(namesrv);
  reinterpret_cast<rocketmq::MQClient*>(p)->setInstanceName(instance);
  return p;
}

void tx_producer_start(void* producer) { static_cast<rocketmq::TransactionMQProducer*>(producer)->start(); }

// The library's heartbeat now, not at its next 30 s tick: the broker checks back only producers it
// heard from, and the client's first heartbeat (10 ms after start) knew no broker yet.
void tx_producer_heartbeat(void* producer) {
  static_cast<rocketmq::MQClient*>(producer)->getFactory()->sendHeartbeatToAllBroker();
}

void tx_producer_shutdown(void* producer) { static_cast<rocketmq::TransactionMQProducer*>(producer)->shutdown(); }

// Sends one message in a transaction; the library calls ``execute`` on this thread and ends the
// transaction with its answer. 0, or -1 when the library threw (the half message was not stored).
int tx_producer_send(void* producer, const char* topic, const char* tags, const char* keys, const char* body) {
  try {
    rocketmq::MQMessage msg(topic, tags, keys, body);
    static_cast<rocketmq::TransactionMQProducer*>(producer)->sendMessageInTransaction(msg, nullptr);
    return 0;
  } catch (...) {
    return -1;
  }
}
}
