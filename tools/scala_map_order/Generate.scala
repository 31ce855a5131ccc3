// Iteration orders of REAL Scala 2.11 collections, for zkcoord.assign.java (legacy-zk-protocol.md §4.3).
//
//   Generate golden <out.json>             compact golden vectors (tests/data/scala-2.11-map-order.json)
//   Generate bulk <seed> <count> <out.json> many random cases, with extra cross-checks, for comparison runs
//
// For each case (distinct keys k1..kn):
//   immutable_order        Map(k1 -> 0, k2 -> 1, ...) (= Map(keys.zipWithIndex: _*)), iterated
//   mutable_order          new mutable.HashMap, put(k_i, i) in key order, iterated
//   roundrobin_topic_order Kafka 0.8.2's chain (RoundRobinAssignor / AssignmentContext):
//                          immutable Map -> mutable.HashMap M0 (put, in Map order; makeConsumerThreadIdsPerTopic)
//                          -> M0.keySet.toSeq -> mutable.HashMap M1 (+=; getPartitionAssignmentForTopics)
//                          -> M2 = M1.map { case (k, v) => (k, v) } (getPartitionsForTopics), iterated
// bulk cases add json_order (JSON.parseFull of {"k1":0,...}, as kafka.utils.Json does) and mutable_dups_* (a
// key list with repeats, inserted with +=).
import scala.collection.mutable
import scala.util.Random
import scala.util.parsing.json.JSON

object Generate {
  // ---- key families --------------------------------------------------------------------------------------
  val legal = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"

  def topicName(r: Random, maxLen: Int = 16): String = {
    val n = 1 + r.nextInt(maxLen)
    (0 until n).map(_ => legal(r.nextInt(legal.length))).mkString
  }

  def printable(r: Random): String = {
    val n = 1 + r.nextInt(12)
    (0 until n).map(_ => (0x20 + r.nextInt(0x5f)).toChar).mkString
  }

  def unicodeName(r: Random): String = {
    val pool = Seq("é", "ß", "Ω", "ж", "中", "文", "\u00ff", "\uffee", "😀", "𝄞", "a", "Z", "0", "-", ".")
    (0 until 1 + r.nextInt(5)).map(_ => pool(r.nextInt(pool.length))).mkString
  }

  /** All strings of `blocks` blocks from {"Aa", "BB"}: 2^blocks keys with one String.hashCode. */
  def aaBB(blocks: Int): Seq[String] =
    if (blocks == 0) Seq("") else for (p <- aaBB(blocks - 1); b <- Seq("Aa", "BB")) yield p + b

  /** A string with the same String.hashCode as s: (c_i, c_i+1) -> (c_i + 1, c_i+1 - 31) somewhere. */
  def collide(r: Random, s: String): Option[String] = {
    val spots = (0 until s.length - 1).filter { i =>
      legal.contains((s(i) + 1).toChar) && legal.contains((s(i + 1) - 31).toChar)
    }
    if (spots.isEmpty) None
    else {
      val i = spots(r.nextInt(spots.length))
      Some(s.substring(0, i) + (s(i) + 1).toChar + (s(i + 1) - 31).toChar + s.substring(i + 2))
    }
  }

  /** n distinct topic-like keys of which roughly half fall into equal-hash groups. */
  def collidingTopics(r: Random, n: Int): Seq[String] = {
    val out = mutable.LinkedHashSet[String]()
    var guard = 0
    while (out.size < n && guard < 100000) {
      guard += 1
      r.nextInt(4) match {
        case 0 => out += topicName(r)
        case 1 => val b = topicName(r, 8); out += b + "Aa"; if (out.size < n) out += b + "BB"
        case 2 =>
          val s = topicName(r, 10)
          out += s
          collide(r, s).foreach(c => if (out.size < n) out += c)
        case _ => val fam = aaBB(1 + r.nextInt(3)); out += fam(r.nextInt(fam.length))
      }
    }
    r.shuffle(out.toSeq)
  }

  val named = Seq("orders", "a.b-c_d", "payments", "__consumer_offsets", "orders-v2", "clicks", "Aa", "BB",
    "AaAa", "AaBB", "BBAa", "BBBB", "logs.app-1", "metrics_raw", "t", "events")

  def distinct(r: Random, n: Int, gen: => String): Seq[String] = {
    val out = mutable.LinkedHashSet[String]()
    while (out.size < n) out += gen
    out.toSeq
  }

  // ---- the real collections --------------------------------------------------------------------------------
  def immutableOrder(keys: Seq[String]): Seq[String] = Map(keys.zipWithIndex: _*).keys.toList

  def mutableOrder(keys: Seq[String]): Seq[String] = {
    val m = new mutable.HashMap[String, Int]()
    for ((k, i) <- keys.zipWithIndex) m.put(k, i)
    val viaIterator = m.keys.toList
    val viaForeach = mutable.ListBuffer[String](); m.foreach { case (k, _) => viaForeach += k }
    require(viaIterator == viaForeach.toList, "iterator and foreach orders differ")
    viaIterator
  }

  def mutableDupsOrder(keys: Seq[String]): Seq[String] = {
    val m = new mutable.HashMap[String, Int]()
    for ((k, i) <- keys.zipWithIndex) m += (k -> i)
    m.keys.toList
  }

  def roundrobinChain(subscription: collection.Map[String, Any]): Seq[String] = {
    val m0 = new mutable.HashMap[String, Set[Int]]()
    for ((topic, _) <- subscription) m0.put(topic, Set(0))
    val topics: Seq[String] = m0.keySet.toSeq
    val m1 = new mutable.HashMap[String, Map[Int, Seq[Int]]]()
    topics.foreach(t => m1 += (t -> Map(0 -> Seq(1))))
    val m2 = m1.map { case (t, pm) => (t -> pm.keys.toSeq.sortWith((s, u) => s < u)) }
    require(m2.isInstanceOf[mutable.HashMap[_, _]], "M2 is not a mutable.HashMap: " + m2.getClass)
    val flat = m2.flatMap { case (t, ps) => ps.map(p => t) }.toList // what RoundRobinAssignor walks
    val keys = m2.keys.toList
    require(flat == keys, "flatMap order differs from key order")
    keys
  }

  def jsonOrder(keys: Seq[String]): Seq[String] = {
    val text = keys.zipWithIndex.map { case (k, i) => json(k) + ":" + i }.mkString("{", ",", "}")
    JSON.parseFull(text) match {
      case Some(m: Map[_, _]) => m.keys.toList.map(_.asInstanceOf[String]) // not keys.map: that builds a Set
      case other => sys.error("JSON.parseFull failed on " + text + ": " + other)
    }
  }

  // ---- output ----------------------------------------------------------------------------------------------
  def json(s: String): String = {
    val b = new StringBuilder("\"")
    s.foreach {
      case '"' => b ++= "\\\""
      case '\\' => b ++= "\\\\"
      case c if c < 0x20 || c > 0x7e => b ++= "\\u%04x".format(c.toInt)
      case c => b += c
    }
    b += '"'
    b.toString
  }

  def jsonList(xs: Seq[String]): String = xs.map(json).mkString("[", ",", "]")

  def caseJson(keys: Seq[String], bulk: Boolean, r: Random): String = {
    require(keys.distinct == keys, "keys must be distinct")
    val imm = immutableOrder(keys)
    val fields = mutable.ListBuffer(
      "\"keys\":" + jsonList(keys),
      "\"immutable_order\":" + jsonList(imm),
      "\"mutable_order\":" + jsonList(mutableOrder(keys)),
      "\"roundrobin_topic_order\":" + jsonList(roundrobinChain(Map(keys.zipWithIndex: _*))))
    if (bulk) {
      fields += "\"json_order\":" + jsonList(jsonOrder(keys))
      val dups = r.shuffle(keys ++ keys.filter(_ => r.nextBoolean()))
      fields += "\"mutable_dups_keys\":" + jsonList(dups)
      fields += "\"mutable_dups_order\":" + jsonList(mutableDupsOrder(dups))
    }
    fields.mkString("{", ",", "}")
  }

  // ---- case sets -------------------------------------------------------------------------------------------
  def cases(r: Random, perSize: Int, randomCount: Int, maxBig: Int, compact: Boolean): Seq[Seq[String]] = {
    val out = mutable.ListBuffer[Seq[String]]()
    val thresholds = Seq(12, 13, 24, 25, 48, 49, 96, 97).filter(_ <= maxBig)
    // every size 1..40, with each family
    for (n <- 1 to 40; _ <- 0 until perSize) {
      out += distinct(r, n, topicName(r))
      out += collidingTopics(r, n)
      if (!compact || n % 3 == 0) out += r.shuffle((1 to 40).map("t" + _)).take(n)
    }
    for (n <- 1 to 40 if !compact || Set(1, 4, 5, 12, 13, 24, 25, 40)(n)) out += (1 to n).map("t" + _)
    // resize thresholds
    for (n <- thresholds; _ <- 0 until perSize) {
      out += distinct(r, n, topicName(r))
      out += collidingTopics(r, n)
      out += distinct(r, n, printable(r))
    }
    // pure hash-collision families, in natural and shuffled orders
    for (blocks <- 1 to 6) {
      val fam = aaBB(blocks)
      out += fam
      out += fam.reverse
      out += r.shuffle(fam)
    }
    out += r.shuffle(aaBB(1) ++ aaBB(2) ++ aaBB(3))
    out += named
    out += r.shuffle(named ++ (1 to 20).map("t" + _))
    for (n <- 1 to named.length) out += r.shuffle(named).take(n)
    // random printable ASCII and a few non-ASCII keys
    for (_ <- 0 until randomCount) {
      val n = 1 + r.nextInt(maxBig)
      out += (r.nextInt(4) match {
        case 0 => distinct(r, n, printable(r))
        case 1 => distinct(r, n, topicName(r))
        case 2 => collidingTopics(r, n)
        case _ => distinct(r, 1 + r.nextInt(20), unicodeName(r))
      })
    }
    out.toList
  }

  def write(path: String, text: String): Unit = {
    val w = new java.io.PrintWriter(path, "UTF-8")
    try w.write(text) finally w.close()
  }

  def main(args: Array[String]): Unit = {
    val version = scala.util.Properties.versionNumberString
    require(version.startsWith("2.11.") || version.startsWith("2.10."), "need Scala 2.10/2.11, got " + version)
    val jar = classOf[mutable.HashMap[_, _]].getProtectionDomain.getCodeSource.getLocation.getPath
    args.toList match {
      case List("golden", out) =>
        val r = new Random(20150204L)
        val cs = cases(r, perSize = 1, randomCount = 30, maxBig = 49, compact = true).filter(_.size <= 49)
        val produced = "Generate.scala (tools/scala_map_order) on Scala " + version + " collections, " +
          "library " + jar + " (Debian package scala-library " + sys.env.getOrElse("SCALA_DEB_VERSION", "?") +
          "), Java " + System.getProperty("java.version") + ", " + java.time.LocalDate.now
        val format = "keys: distinct keys in insertion order; immutable_order: Map(keys.zipWithIndex: _*) iterated; " +
          "mutable_order: mutable.HashMap filled by put in key order, iterated; roundrobin_topic_order: " +
          "immutable Map -> mutable.HashMap M0 (put) -> M0.keySet.toSeq -> mutable.HashMap M1 (+=) -> " +
          "M2 = M1.map{case (k, v) => (k, v)}, M2 iterated (legacy-zk-protocol.md 4.3)"
        write(out, "{\"format\":" + json(format) + ",\n\"produced_by\":" + json(produced) + ",\n\"cases\":[\n" +
          cs.map(k => caseJson(k, bulk = false, r)).mkString(",\n") + "\n]}\n")
        println("wrote " + cs.size + " golden cases to " + out)
      case List("bulk", seed, count, out) =>
        val r = new Random(seed.toLong)
        val cs = cases(r, perSize = count.toInt / 400 + 1, randomCount = count.toInt / 2, maxBig = 97, compact = false)
        write(out, "{\"produced_by\":" + json("Scala " + version + " " + jar) + ",\n\"cases\":[\n" +
          cs.map(k => caseJson(k, bulk = true, r)).mkString(",\n") + "\n]}\n")
        println("wrote " + cs.size + " bulk cases to " + out)
      case _ =>
        System.err.println("usage: Generate golden OUT.json | Generate bulk SEED COUNT OUT.json"); sys.exit(2)
    }
  }
}
