#include "examples/zoo/opencv_reference.h"

#include <onnx/onnx_pb.h>
#include <opencv2/dnn.hpp>

#include <cstring>
#include <optional>

#include "vpu_target/input_file.h"

namespace vpuc::zoo {

namespace {

// The scalar value of a float initializer, or nullopt.
std::optional<float> scalar_initializer(const onnx::GraphProto &graph, const std::string &name) {
    for (const onnx::TensorProto &t : graph.initializer()) {
        if (t.name() != name || t.data_type() != onnx::TensorProto::FLOAT || t.dims_size() != 0)
            continue;
        if (t.float_data_size() == 1) return t.float_data(0);
        if (t.raw_data().size() != sizeof(float)) return std::nullopt;
        float value = 0;
        std::memcpy(&value, t.raw_data().data(), sizeof value);
        return value;
    }
    return std::nullopt;
}

// The model in a form OpenCV 4.6 reads, computing the same: it takes Clip's bounds only as the
// attributes of opset 6, not as the inputs of opset 11 on, so a Clip whose bounds are scalar
// initializers gets them as attributes.
std::string for_opencv(const std::vector<uint8_t> &bytes, const std::string &path) {
    onnx::ModelProto model;
    if (!model.ParseFromArray(bytes.data(), int(bytes.size())))
        throw OpenCvReferenceError(path + ": not an ONNX model (it does not parse)");
    onnx::GraphProto &graph = *model.mutable_graph();
    for (onnx::NodeProto &node : *graph.mutable_node()) {
        if (node.op_type() != "Clip" || node.input_size() == 1) continue;
        std::vector<onnx::AttributeProto> bounds;
        bool constant = true;
        for (int i = 1; i < node.input_size(); ++i) {
            if (node.input(i).empty()) continue;
            const std::optional<float> bound = scalar_initializer(graph, node.input(i));
            constant = bound.has_value();
            if (!constant) break;
            onnx::AttributeProto &attribute = bounds.emplace_back();
            attribute.set_name(i == 1 ? "min" : "max");
            attribute.set_type(onnx::AttributeProto::FLOAT);
            attribute.set_f(*bound);
        }
        if (!constant) continue; // for OpenCV to refuse
        node.mutable_input()->DeleteSubrange(1, node.input_size() - 1);
        for (const onnx::AttributeProto &attribute : bounds) *node.add_attribute() = attribute;
    }
    std::string text;
    model.SerializeToString(&text);
    return text;
}

// A numpy-convention tensor as an OpenCV blob: the numpy shape, C order, so the bytes are the
// dense buffer's bytes.
cv::Mat to_mat(const frontend::NamedTensor &tensor, const std::string &path) {
    if (tensor.value.type() != Halide::Float(32))
        throw OpenCvReferenceError(path + ": input '" + tensor.name + "' is " +
                                   frontend::dtype_name(tensor.value.type()) +
                                   "; OpenCV is given float32 inputs");
    const Halide::Buffer<> data = frontend::dense(tensor.value);
    std::vector<int> sizes;
    for (int d = data.dimensions() - 1; d >= 0; --d) sizes.push_back(data.dim(d).extent());
    // OpenCV has no matrices of fewer than 2 dimensions.
    while (sizes.size() < 2) sizes.insert(sizes.begin(), 1);
    cv::Mat mat(int(sizes.size()), sizes.data(), CV_32F);
    std::memcpy(mat.data, data.data(), data.size_in_bytes());
    return mat;
}

Halide::Buffer<> to_tensor(const cv::Mat &mat, const std::string &what) {
    if (mat.type() != CV_32F) throw OpenCvReferenceError(what + " is not float32");
    const cv::Mat dense = mat.isContinuous() ? mat : mat.clone();
    std::vector<int> extents;
    for (int d = dense.dims - 1; d >= 0; --d) extents.push_back(dense.size[d]);
    Halide::Buffer<> tensor(Halide::Float(32), extents);
    std::memcpy(tensor.data(), dense.data, tensor.size_in_bytes());
    return tensor;
}

} // namespace

std::vector<frontend::NamedTensor> run_opencv(const std::string &path,
                                              const std::vector<frontend::NamedTensor> &inputs,
                                              const std::vector<std::string> &output_names) {
    return run_opencv_bytes(files::read_input_file(path, files::FileKind::Model), path, inputs,
                            output_names);
}

std::vector<frontend::NamedTensor>
run_opencv_bytes(const std::vector<uint8_t> &bytes, const std::string &path,
                 const std::vector<frontend::NamedTensor> &inputs,
                 const std::vector<std::string> &output_names) {
    std::vector<cv::Mat> results;
    try {
        const std::string model = for_opencv(bytes, path);
        cv::dnn::Net net = cv::dnn::readNetFromONNX(model.data(), model.size());
        net.setPreferableBackend(cv::dnn::DNN_BACKEND_OPENCV);
        net.setPreferableTarget(cv::dnn::DNN_TARGET_CPU);
        for (const frontend::NamedTensor &input : inputs)
            net.setInput(to_mat(input, path), input.name);
        std::vector<cv::String> names(output_names.begin(), output_names.end());
        net.forward(results, names);
    } catch (const cv::Exception &e) {
        throw OpenCvReferenceError(path + ": OpenCV DNN: " + e.what());
    }
    std::vector<frontend::NamedTensor> outputs;
    for (size_t i = 0; i < output_names.size(); ++i)
        outputs.push_back({output_names[i],
                           to_tensor(results.at(i), path + ": output '" + output_names[i] + "'")});
    return outputs;
}

} // namespace vpuc::zoo
